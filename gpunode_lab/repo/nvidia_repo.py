"""NVIDIA's CUDA repository as the lab models it: nvidia_repo.yaml, and what each folder holds.

The data is the lab's own, never gpunode's compatibility rules: the lab plays NVIDIA, and
gpunode has to cope with what NVIDIA (and a mirror lagging behind it) really publishes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

from gpunode.versions import compare_dotted, dotted_key
from gpunode_lab.state import MIRRORS

DATA_FILE = "nvidia_repo.yaml"


@dataclass(frozen=True)
class Branch:
    name: str  # 550
    cuda: str  # the CUDA version its drivers report: 12.4
    releases: tuple[str, ...]  # oldest first
    unversioned: bool  # packages named without the branch (590 on)

    def named(self, base: str) -> str:
        """libnvidia-compute-550, or libnvidia-compute from the unversioned branches on."""
        return base if self.unversioned else f"{base}-{self.name}"


@dataclass(frozen=True)
class Toolkit:
    cuda: str  # 12.4
    release: str  # 12.4.1
    nvcc: str  # 12.4.131
    cudart: str  # 12.4.127
    cublas: str  # 12.4.5.8
    min_driver: str  # 550.54.14
    ubuntu: tuple[str, ...]


@dataclass(frozen=True)
class Folder:
    """What one folder (ubuntu2204/x86_64/ ...) of one mirror publishes."""

    branches: tuple[Branch, ...]  # every branch, each with the releases this folder has
    toolkits: tuple[Toolkit, ...]
    cudnn9: dict[str, tuple[str, ...]]  # release -> CUDA majors
    cudnn8: tuple[str, ...]
    nccl: tuple[str, ...]  # builds: 2.21.5-1+cuda12.4
    tensorrt: tuple[str, ...] = ()  # builds: 10.13.3.9-1+cuda13.0
    dcgm: dict[str, tuple[str, ...]] = field(default_factory=dict)  # release -> CUDA majors


def _text() -> str:
    return (resources.files("gpunode_lab.repo") / DATA_FILE).read_text(encoding="utf-8")


@cache
def data() -> dict[str, Any]:
    from ruamel.yaml import YAML

    doc: dict[str, Any] = YAML(typ="safe", pure=True).load(_text())
    _check(doc)
    return doc


def distros() -> dict[str, str]:
    """Folder name -> Ubuntu release: ubuntu2204 -> 22.04."""
    return {str(k): str(v) for k, v in data()["distros"].items()}


def kernels() -> dict[str, str]:
    """Ubuntu kernel release -> the Debian version of its linux-image and linux-headers."""
    return {str(k): str(v) for k, v in data().get("kernels", {}).items()}


def branches() -> tuple[Branch, ...]:
    drivers = data()["drivers"]
    first = str(drivers["unversioned_from"])
    out = [
        Branch(
            str(name),
            str(entry["cuda"]),
            tuple(sorted((str(r) for r in entry["releases"]), key=dotted_key)),
            compare_dotted(str(name), first) >= 0,
        )
        for name, entry in drivers["branches"].items()
    ]
    return tuple(sorted(out, key=lambda b: dotted_key(b.name)))


def toolkits() -> tuple[Toolkit, ...]:
    out = [
        Toolkit(
            cuda=str(cuda),
            release=str(e["release"]),
            nvcc=str(e["nvcc"]),
            cudart=str(e["cudart"]),
            cublas=str(e["cublas"]),
            min_driver=str(e["min_driver"]),
            ubuntu=tuple(str(u) for u in e["ubuntu"]),
        )
        for cuda, e in data()["toolkits"].items()
    ]
    return tuple(sorted(out, key=lambda t: dotted_key(t.cuda)))


def cudnn9() -> dict[str, tuple[str, ...]]:
    return {str(v): tuple(str(m) for m in ms) for v, ms in data()["cudnn9"].items()}


def nccl_builds() -> tuple[str, ...]:
    return tuple(
        f"{version}-1+cuda{cuda}" for version, cudas in data()["nccl"].items() for cuda in cudas
    )


def tensorrt_builds() -> tuple[str, ...]:
    return tuple(
        f"{release}-1+cuda{cuda}"
        for release, cudas in data().get("tensorrt", {}).items()
        for cuda in cudas
    )


def dcgm_releases() -> dict[str, tuple[str, ...]]:
    return {str(r): tuple(str(m) for m in ms) for r, ms in data().get("dcgm", {}).items()}


def withheld(distro: str, mirror: str) -> dict[str, set[str]]:
    """Per table (drivers, cudnn9, nccl): what this folder of this mirror leaves out."""
    if mirror not in MIRRORS:
        raise ValueError(f"unknown mirror {mirror!r}; one of {', '.join(MIRRORS)}")
    sections = [data().get("missing", {}).get(distro, {})]
    if mirror == "lagging":
        sections.append(data()["lagging"])
    out: dict[str, set[str]] = {"drivers": set(), "cudnn9": set(), "nccl": set()}
    for section in sections:
        for table, items in section.items():
            out[str(table)] |= {str(i) for i in items}
    return out


def withheld_packages(mirror: str) -> set[tuple[str, str]]:
    """(name, release) of the packages a mirror caught mid-sync has not fetched yet."""
    if mirror != "mid-sync":
        return set()
    return {(str(n), str(r)) for n, r in data()["mid_sync"]["packages"]}


def folder(distro: str, mirror: str = "full") -> Folder:
    ubuntu = distros()[distro]
    left_out = withheld(distro, mirror)
    return Folder(
        branches=tuple(
            replace(b, releases=tuple(r for r in b.releases if r not in left_out["drivers"]))
            for b in branches()
        ),
        toolkits=tuple(t for t in toolkits() if ubuntu in t.ubuntu),
        cudnn9={v: ms for v, ms in cudnn9().items() if v not in left_out["cudnn9"]},
        cudnn8=tuple(str(v) for v in data()["cudnn8"]),
        nccl=tuple(b for b in nccl_builds() if b not in left_out["nccl"]),
        tensorrt=tensorrt_builds(),
        dcgm=dcgm_releases(),
    )


def _check(doc: dict[str, Any]) -> None:
    """Every withheld item must name something published: a typo would withhold nothing."""
    known = {
        "drivers": {str(r) for e in doc["drivers"]["branches"].values() for r in e["releases"]},
        "cudnn9": {str(v) for v in doc["cudnn9"]},
        "nccl": {f"{v}-1+cuda{c}" for v, cs in doc["nccl"].items() for c in cs},
    }
    for name, release in doc.get("mid_sync", {}).get("packages", []):
        if str(release) not in known["drivers"]:
            raise ValueError(f"{DATA_FILE}: mid_sync names {name} {release}, no release")
    for where, section in [("lagging", doc["lagging"]), *doc.get("missing", {}).items()]:
        for table, items in section.items():
            unknown = {str(i) for i in items} - known.get(str(table), set())
            if unknown:
                raise ValueError(f"{DATA_FILE}: {where}.{table} names {sorted(unknown)}")
