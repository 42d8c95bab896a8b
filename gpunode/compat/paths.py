"""Where NVIDIA's packages write on a host: what the free-space preflight counts, per
filesystem, for the packages a plan installs (gpunode.plan.space), and the paths whose
filesystems the facts measure (`df`, gpunode.facts).

Each entry names its source. Sizes come from the repository's index: a package's
Installed-Size (what dpkg unpacks) goes where the package writes, times `share` (DKMS copies
its sources to build them); its Size (the .deb) goes to apt's archives, whatever the package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ARCHIVES = "/var/cache/apt/archives"  # apt downloads every .deb here before dpkg unpacks one
BOOT = "/boot"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
OTHER = "/usr"  # a package no entry knows: its files go under /usr, as Debian's policy says
INITRAMFS_BYTES = 100 << 20  # one more initramfs while update-initramfs writes the new one


@dataclass(frozen=True)
class Writes:
    """Packages whose names match `names` write their Installed-Size times `share` to each
    path (`{x}`, `{y}`: the toolkit's series from the name), and `fixed` bytes besides."""

    names: re.Pattern[str]
    paths: tuple[tuple[str, int], ...]  # (path, share of Installed-Size)
    source: str
    fixed: tuple[tuple[str, int], ...] = ()


TABLE: tuple[Writes, ...] = (
    Writes(
        re.compile(r"^nsight-(systems|compute)-"),
        (("/opt/nvidia", 1),),
        "NVIDIA's Nsight Systems and Nsight Compute installation guides: the .debs unpack into "
        "/opt/nvidia/nsight-systems/<version> and /opt/nvidia/nsight-compute/<version> "
        "(cuda-nsight-systems-X-Y depends on them)",
    ),
    Writes(
        re.compile(r"^nvidia-(dkms|kernel-source)-"),
        (("/usr/src", 1), ("/var/lib/dkms", 2), ("/lib/modules", 1)),
        "DKMS's dkms_framework.conf: sources in source_tree (/usr/src), each build in "
        "dkms_tree (/var/lib/dkms: a copy of the sources and the objects made from them), "
        "modules installed into install_tree (/lib/modules); gpunode_lab's nvidia-dkms "
        "stand-in ships /usr/src/nvidia-<release>/dkms.conf",
        fixed=((BOOT, INITRAMFS_BYTES),),
    ),
    Writes(
        re.compile(r"^linux-modules-nvidia-"),
        (("/lib/modules", 1),),
        "Ubuntu's precompiled modules (driver source: ubuntu): /lib/modules/<kernel>, and "
        "the kernel's initramfs hook writes a new initramfs into /boot",
        fixed=((BOOT, INITRAMFS_BYTES),),
    ),
    Writes(
        re.compile(r"^(libcudnn|libnccl|libnvinfer|libnvonnxparsers|libnvidia-)"),
        ((LIBDIR, 1),),
        "cuDNN's, NCCL's, TensorRT's and the driver's libraries in the multiarch directory, "
        "their headers in /usr/include (the same filesystem as /usr unless mounted apart); "
        "gpunode_lab/repo/catalog_cudnn.py, catalog_nccl.py and catalog_driver.py",
    ),
    Writes(
        re.compile(r"-(?P<x>\d+)-(?P<y>\d+)$"),  # cuda-nvcc-12-4, libcublas-12-4, cuda-toolkit-12-4
        (("/usr/local/cuda-{x}.{y}", 1),),
        "NVIDIA's CUDA Installation Guide for Linux (the toolkit's packages install under "
        "/usr/local/cuda-X.Y); gpunode_lab/repo/catalog_toolkit.py lays them out the same way",
    ),
)


@dataclass(frozen=True)
class Written:
    path: str
    bytes: int
    once: bool = False  # a fixed write (the initramfs): once per plan, however many ask


def written(name: str, installed_kib: int | None, download_bytes: int | None) -> list[Written]:
    """Where one package's install writes, and how much, by the first entry that names it."""
    out = [Written(ARCHIVES, download_bytes or 0)]
    entry = next((e for e in TABLE if e.names.search(name)), None)
    size = (installed_kib or 0) << 10
    if entry is None:
        return [*out, Written(OTHER, size)]
    found = entry.names.search(name)
    series = found.groupdict() if found else {}
    out += [Written(path.format(**series), size * share) for path, share in entry.paths]
    return out + [Written(path, n, once=True) for path, n in entry.fixed]


def measured() -> list[str]:
    """The paths whose filesystems the facts measure: every entry's, a toolkit's folder as a
    glob (`/usr/local/cuda-*`: one the host has may be a mount of its own; one it has not
    yet lives on /usr/local's filesystem, measured too)."""
    out = [ARCHIVES, BOOT, OTHER, "/usr/local"]
    for entry in TABLE:
        for path, _ in (*entry.paths, *entry.fixed):
            path = re.sub(r"\{\w+\}\.\{\w+\}", "*", path)
            if path not in out:
                out.append(path)
    return out
