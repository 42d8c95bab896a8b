"""NVIDIA's libnvidia-container repository as the lab models it (container_repo.yaml): one
flat folder, stable/deb/amd64/, of the Container Toolkit's four packages per release, signed
with a key of its own that the folder's parent serves armoured as `gpgkey`."""

from __future__ import annotations

from functools import cache
from importlib import resources

from gpunode_lab.repo.deb import LIBDIR, Package, Payload

DATA_FILE = "container_repo.yaml"
STANDIN = "ctk_standin.py"
FOLDER = "libnvidia-container"  # served at <base>/libnvidia-container/


@cache
def releases() -> tuple[str, ...]:
    from ruamel.yaml import YAML

    text = (resources.files("gpunode_lab.repo") / DATA_FILE).read_text(encoding="utf-8")
    doc = YAML(typ="safe", pure=True).load(text)
    return tuple(str(r) for r in doc["releases"])


def _ctk(release: str) -> bytes:
    text = (resources.files("gpunode_lab.repo") / STANDIN).read_text(encoding="utf-8")
    return text.replace('VERSION = "1.17.8"', f'VERSION = "{release}"', 1).encode()


def _runtime(release: str) -> bytes:
    return (
        "#!/bin/sh\n# gpunode lab stand-in for nvidia-container-runtime"
        f' {release}: a runc wrapper.\nexec runc "$@"\n'
    ).encode()


def container_packages() -> list[Package]:
    out: list[Package] = []
    for release in releases():
        v = f"{release}-1"
        out += [
            Package(
                "libnvidia-container1",
                v,
                "NVIDIA container runtime library\n The library that configures containers"
                " to use NVIDIA GPUs.",
                section="libs",
                files=[
                    Payload(f"{LIBDIR}/libnvidia-container.so.{release}"),
                    Payload(
                        f"{LIBDIR}/libnvidia-container.so.1",
                        symlink=f"libnvidia-container.so.{release}",
                    ),
                ],
            ),
            Package(
                "libnvidia-container-tools",
                v,
                "NVIDIA container runtime library (command-line tools)",
                section="utils",
                depends=[f"libnvidia-container1 (>= {v})"],
                files=[Payload("/usr/bin/nvidia-container-cli", b"#!/bin/sh\nexit 0\n", 0o755)],
            ),
            Package(
                "nvidia-container-toolkit-base",
                v,
                "NVIDIA Container Toolkit Base\n nvidia-ctk and nvidia-container-runtime.",
                section="utils",
                files=[
                    Payload("/usr/bin/nvidia-ctk", _ctk(release), 0o755),
                    Payload("/usr/bin/nvidia-container-runtime", _runtime(release), 0o755),
                    Payload("/usr/bin/nvidia-cdi-hook", b"#!/bin/sh\nexit 0\n", 0o755),
                ],
            ),
            Package(
                "nvidia-container-toolkit",
                v,
                "NVIDIA Container toolkit\n The runtime hook for GPU containers.",
                section="utils",
                depends=[
                    f"nvidia-container-toolkit-base (= {v})",
                    f"libnvidia-container-tools (>= {v})",
                    "libnvidia-container-tools (<< 2.0.0)",
                ],
                files=[
                    Payload(
                        "/usr/bin/nvidia-container-runtime-hook", b"#!/bin/sh\nexit 0\n", 0o755
                    ),
                ],
            ),
        ]
    return out
