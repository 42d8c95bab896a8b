"""TensorRT packages: NVIDIA's names, one Debian version per build (<release>-1+cudaX.Y)
for every package of a release, the metapackages' exact-version Depends, a header and a
dist-info that tell the version.

Written from NVIDIA's published naming (the TensorRT install guide and the CUDA
repository's index), not from gpunode's tables. The libraries are empty stand-ins and the
Python packages carry their dist-info alone: no `tensorrt` module, nothing to import.
"""

from __future__ import annotations

from gpunode_lab.repo.deb import LIBDIR, Package, Payload

INCLUDE = "/usr/include/x86_64-linux-gnu"
DIST_PACKAGES = "/usr/lib/python3/dist-packages"
# runtime package -> the library it ships (libnvinfer.so.10.13.3, and .so.10 pointing at it)
LIBRARIES = {
    "libnvinfer10": "libnvinfer",
    "libnvinfer-plugin10": "libnvinfer_plugin",
    "libnvinfer-lean10": "libnvinfer_lean",
    "libnvinfer-dispatch10": "libnvinfer_dispatch",
    "libnvinfer-vc-plugin10": "libnvinfer_vc_plugin",
    "libnvonnxparsers10": "libnvonnxparser",
}
# Python package -> its distribution's name and the library it binds
PYTHON = {
    "python3-libnvinfer": ("tensorrt", "libnvinfer10"),
    "python3-libnvinfer-lean": ("tensorrt_lean", "libnvinfer-lean10"),
    "python3-libnvinfer-dispatch": ("tensorrt_dispatch", "libnvinfer-dispatch10"),
}


def tensorrt_packages(builds: tuple[str, ...]) -> list[Package]:
    out: list[Package] = []
    for build in builds:
        out += _release(build)
    return out


def _release(v: str) -> list[Package]:
    release, cuda = v.split("-")[0], v.rsplit("+cuda", 1)[1]
    so = ".".join(release.split(".")[:3])  # the library's file version: 10.13.3
    major = release.split(".")[0]

    def eq(*names: str) -> list[str]:
        return [f"{n} (= {v})" for n in names]

    def pkg(
        name: str,
        what: str,
        depends: list[str] | None = None,
        files: list[Payload] | None = None,
        section: str = "multiverse/devel",
    ) -> Package:
        return Package(
            name,
            v,
            f"TensorRT {what} (built for CUDA {cuda})",
            depends=depends or [],
            files=files or [],
            section=section,
        )

    out = [
        pkg(
            name,
            f"runtime library {lib}",
            section="multiverse/libs",
            depends=[] if name in ("libnvinfer10", "libnvinfer-lean10") else eq("libnvinfer10"),
            files=[
                Payload(f"{LIBDIR}/{lib}.so.{so}"),
                Payload(f"{LIBDIR}/{lib}.so.{major}", symlink=f"{lib}.so.{so}"),
            ],
        )
        for name, lib in LIBRARIES.items()
    ]
    out.append(pkg("libnvinfer-headers-dev", "headers", files=[_version_header(release)]))
    out.append(
        pkg(
            "libnvinfer-headers-plugin-dev",
            "plugin headers",
            files=[Payload(f"{INCLUDE}/NvInferPlugin.h", b"/* gpunode lab stand-in */\n")],
        )
    )
    dev = {
        "libnvinfer-dev": ("libnvinfer10", "libnvinfer-headers-dev"),
        "libnvinfer-plugin-dev": ("libnvinfer-plugin10", "libnvinfer-headers-plugin-dev"),
        "libnvinfer-lean-dev": ("libnvinfer-lean10",),
        "libnvinfer-dispatch-dev": ("libnvinfer-dispatch10",),
        "libnvinfer-vc-plugin-dev": ("libnvinfer-vc-plugin10",),
        "libnvonnxparsers-dev": ("libnvonnxparsers10", "libnvinfer-dev"),
    }
    for name, runtime in dev.items():
        lib = LIBRARIES[runtime[0]]
        out.append(
            pkg(
                name,
                f"development files for {lib}",
                depends=eq(*runtime),
                files=[Payload(f"{LIBDIR}/{lib}.so", symlink=f"{lib}.so.{major}")],
            )
        )
    out.append(
        pkg(
            "libnvinfer-bin",
            "trtexec",
            depends=eq("libnvinfer10", "libnvinfer-plugin10", "libnvonnxparsers10"),
            files=[Payload("/usr/src/tensorrt/bin/trtexec", b"#!/bin/sh\nexit 1\n", mode=0o755)],
        )
    )
    for name, (dist, lib) in PYTHON.items():
        out.append(
            pkg(name, f"Python bindings ({dist})", depends=eq(lib), files=_dist(dist, release))
        )
    out.append(
        pkg("python3-libnvinfer-dev", "Python development files", depends=eq("python3-libnvinfer"))
    )
    meta = {
        "tensorrt-libs": list(LIBRARIES),
        "tensorrt-dev": [*dev, "libnvinfer-headers-dev", "libnvinfer-headers-plugin-dev"],
    }
    meta["tensorrt"] = [*meta["tensorrt-libs"], *meta["tensorrt-dev"], "libnvinfer-bin",
                        *PYTHON, "python3-libnvinfer-dev"]  # fmt: skip
    for name, deps in meta.items():
        out.append(pkg(name, f"metapackage {name}", depends=eq(*deps)))
    return out


def _version_header(release: str) -> Payload:
    major, minor, patch, build = release.split(".")
    text = (
        f"/* gpunode lab stand-in for NvInferVersion.h ({release}) */\n"
        f"#define NV_TENSORRT_MAJOR {major}\n#define NV_TENSORRT_MINOR {minor}\n"
        f"#define NV_TENSORRT_PATCH {patch}\n#define NV_TENSORRT_BUILD {build}\n"
    )
    return Payload(f"{INCLUDE}/NvInferVersion.h", text.encode())


def _dist(dist: str, release: str) -> list[Payload]:
    where = f"{DIST_PACKAGES}/{dist}-{release}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {release}\n"
    return [
        Payload(f"{where}/METADATA", meta.encode()),
        Payload(f"{where}/INSTALLER", b"dpkg\n"),
    ]
