"""Real download sizes for the lab's stand-in packages, for the bandwidth benchmark only.

The stand-ins are a few KiB; NVIDIA's real packages are hundreds of MiB (the CUDA toolkit
about 3 GB), so a link limit measures nothing with them. With GPUNODE_LAB_PAD_SCALE=S in
the environment of `gpunode lab up` (bench/compare/coldlink.py sets it for its own lab;
nothing else does), deb.deb_bytes pads each
package of the benchmark's stack (driver 580, CUDA 13.0, cuDNN 9 for CUDA 13, NCCL for
CUDA 13.0) to its real size divided by S, with a trailing ar member of zeros after
data.tar.gz, which dpkg ignores (deb(5): members after data.tar are skipped): apt
downloads and hashes every byte, dpkg unpacks only the stand-in's files.

Sizes: cuDNN's and NCCL's are the `Size:` fields of NVIDIA's real index
(tests/fixtures/repoindex/Packages-ubuntu2204-x86_64: libcudnn9-cuda-13 9.14.0.64 and
libnccl2/libnccl-dev 2.28.3+cuda13.0). The driver's and the toolkit's packages are not in
that fixture: their sizes are estimates from NVIDIA's repository listing (driver 580 about
400 MB of .debs, CUDA 13.0 about 3 GB). The lab's toolkit has fewer packages than the real
one, so the bytes of the missing libraries (cuFFT, cuSPARSE, cuSOLVER, NPP, Nsight, ...)
are carried by the lab's cuda-libraries/-dev/-tools metapackages: the bytes per host match,
the number of files does not.
"""

from __future__ import annotations

import re

MIB = 1024 * 1024
DRIVER_V = r"580\..*-0ubuntu1"  # NVIDIA's repository's builds, not Ubuntu's archive's

# (name pattern, version pattern) -> real download size in bytes
REAL_SIZES: list[tuple[str, str, int]] = [
    # NVIDIA's index (the fixture above)
    (r"libcudnn9-cuda-13", r".*", 500_337 * 1024),
    (r"libnccl2", r".*\+cuda13\.0", 206_914 * 1024),
    (r"libnccl-dev", r".*\+cuda13\.0", 209_843 * 1024),
    # driver 580 (estimates)
    (r"libnvidia-compute-580", DRIVER_V, 60 * MIB),
    (r"nvidia-dkms-580(-open)?", DRIVER_V, 20 * MIB),
    (r"nvidia-utils-580", DRIVER_V, 10 * MIB),
    (r"nvidia-compute-utils-580", DRIVER_V, 1 * MIB),
    (r"libnvidia-nscq-580", DRIVER_V, 5 * MIB),
    (r"nvidia-fabricmanager-580", DRIVER_V, 10 * MIB),
    (r"nvidia-driver-580(-open)?", DRIVER_V, 300 * MIB),  # with libnvidia-gl, firmware, ...
    # CUDA 13.0 (estimates)
    (r"cuda-nvcc-13-0", r".*", 70 * MIB),
    (r"cuda-nvrtc-13-0", r".*", 60 * MIB),
    (r"cuda-nvrtc-dev-13-0", r".*", 60 * MIB),
    (r"libcublas-13-0", r".*", 420 * MIB),
    (r"libcublas-dev-13-0", r".*", 460 * MIB),
    (r"cuda-cupti-13-0", r".*", 15 * MIB),
    (r"cuda-cudart(-dev)?-13-0", r".*", 1 * MIB),
    (r"cuda-libraries-13-0", r".*", 800 * MIB),  # the real toolkit's other runtime libraries
    (r"cuda-libraries-dev-13-0", r".*", 700 * MIB),  # ... their -dev packages
    (r"cuda-tools-13-0", r".*", 450 * MIB),  # ... Nsight, sanitizer, gdb
]


def real_size(name: str, version: str) -> int:
    """The real package's download size, or 0 where the benchmark leaves it as it is."""
    for name_re, version_re, size in REAL_SIZES:
        if re.fullmatch(name_re, name) and re.fullmatch(version_re, version):
            return size
    return 0


def pad_bytes(name: str, version: str, built: int, scale: int) -> int:
    """Zeros to add so a stand-in of `built` bytes weighs real size / scale."""
    if scale <= 0:
        return 0
    return max(0, real_size(name, version) // scale - built)
