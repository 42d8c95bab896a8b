"""NCCL packages: libnccl2/libnccl-dev <version>-1+cudaX.Y, one build per CUDA version it
was built with, and a header that tells the version."""

from __future__ import annotations

from gpunode_lab.repo.deb import LIBDIR, Package, Payload


def nccl_packages(builds: tuple[str, ...]) -> list[Package]:
    out: list[Package] = []
    for build in builds:
        upstream, cuda = build.split("-")[0], build.rsplit("+cuda", 1)[1]
        major, minor, patch = upstream.split(".")
        header = (
            f"/* gpunode lab stand-in for nccl.h, NCCL {upstream} built for CUDA {cuda} */\n"
            f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n"
            f'#define NCCL_PATCH {patch}\n#define NCCL_SUFFIX ""\n'
            f"#define NCCL_VERSION_CODE {int(major) * 10000 + int(minor) * 100 + int(patch)}\n"
        )
        out += [
            Package(
                "libnccl2",
                build,
                "NVIDIA Collective Communication Library (NCCL) Runtime",
                section="libs",
                files=[
                    Payload(f"{LIBDIR}/libnccl.so.{upstream}"),
                    Payload(f"{LIBDIR}/libnccl.so.2", symlink=f"libnccl.so.{upstream}"),
                ],
            ),
            Package(
                "libnccl-dev",
                build,
                "NVIDIA Collective Communication Library (NCCL) Development Files",
                section="libdevel",
                depends=[f"libnccl2 (= {build})"],
                files=[
                    Payload("/usr/include/nccl.h", header.encode()),
                    Payload(f"{LIBDIR}/libnccl.so", symlink="libnccl.so.2"),
                ],
            ),
        ]
    return out
