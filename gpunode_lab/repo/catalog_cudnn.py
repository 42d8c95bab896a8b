"""cuDNN packages: NVIDIA's names and version strings, a header that tells the version.

cuDNN 9 has one package set per CUDA major (libcudnn9-cuda-12 ...), and the sets for
different majors exclude each other; cuDNN 8 is libcudnn8 with a +cudaX.Y build.
"""

from __future__ import annotations

from gpunode_lab.repo.deb import LIBDIR, Package, Payload


def _cudnn_header(version: str, suffix: str) -> Payload:
    major, minor, patch = version.split(".")[:3]
    text = (
        f"/* gpunode lab stand-in for cudnn_version.h ({version}) */\n"
        f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n"
        f"#define CUDNN_PATCHLEVEL {patch}\n"
        "#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n"
    )
    return Payload(f"/usr/include/x86_64-linux-gnu/cudnn_version_{suffix}.h", text.encode())


def _alternative_scripts(major: str, header: str) -> dict[str, str]:
    link = "/usr/include/x86_64-linux-gnu/cudnn_version.h"
    return {
        "postinst": (
            "#!/bin/sh\nset -e\n"
            'if [ "$1" = configure ]; then\n'
            f"  update-alternatives --install {link} libcudnn_version_h {header} {major}0\n"
            "fi\n"
        ),
        "prerm": (
            "#!/bin/sh\nset -e\n"
            'if [ "$1" = remove ] || [ "$1" = deconfigure ]; then\n'
            f"  update-alternatives --remove libcudnn_version_h {header}\n"
            "fi\n"
        ),
    }


def cudnn8_packages(versions: tuple[str, ...]) -> list[Package]:
    out: list[Package] = []
    for version in versions:
        upstream = version.split("-")[0]
        header = _cudnn_header(upstream, "v8")
        out += [
            Package(
                "libcudnn8",
                version,
                "cuDNN runtime libraries",
                section="multiverse/libs",
                files=[Payload(f"{LIBDIR}/libcudnn.so.{upstream}")],
            ),
            Package(
                "libcudnn8-dev",
                version,
                "cuDNN development libraries and headers",
                depends=[f"libcudnn8 (= {version})"],
                files=[header],
                scripts=_alternative_scripts("8", header.path),
            ),
        ]
    return out


def cudnn9_packages(releases: dict[str, tuple[str, ...]], majors: tuple[str, ...]) -> list[Package]:
    """`releases`: release -> CUDA majors built; `majors`: every CUDA major cuDNN 9 has."""
    out: list[Package] = []
    for version, cuda_majors in releases.items():
        for cuda_major in cuda_majors:
            out += _cudnn9_set(version, cuda_major, [m for m in majors if m != cuda_major])
    return out


def _cudnn9_set(version: str, cuda_major: str, others: list[str]) -> list[Package]:
    upstream = version.split("-")[0]
    header = _cudnn_header(upstream, "v9")
    lib = f"libcudnn9-cuda-{cuda_major}"
    hdr = f"libcudnn9-headers-cuda-{cuda_major}"
    dev = f"libcudnn9-dev-cuda-{cuda_major}"

    def excl(base: str) -> list[str]:
        return [f"{base}-cuda-{m}" for m in others]

    return [
        Package(
            lib,
            version,
            f"cuDNN runtime libraries for CUDA {cuda_major}",
            section="multiverse/libs",
            conflicts=excl("libcudnn9"),
            replaces=excl("libcudnn9"),
            files=[Payload(f"{LIBDIR}/libcudnn.so.{upstream}")],
        ),
        Package(
            hdr,
            version,
            f"cuDNN header files for CUDA {cuda_major}",
            conflicts=excl("libcudnn9-headers"),
            replaces=excl("libcudnn9-headers"),
            files=[header],
            scripts=_alternative_scripts("9", header.path),
        ),
        Package(
            dev,
            version,
            f"cuDNN development libraries for CUDA {cuda_major}",
            depends=[f"{lib} (= {version})", f"{hdr} (= {version})"],
            conflicts=excl("libcudnn9-dev"),
            replaces=excl("libcudnn9-dev"),
        ),
    ]
