"""Compatibility rules: which stacks can work, and the exact packages they mean.

The data lives in rules.yaml beside this file, each table citing its source.
Everything here is a pure function of that data and the declared stack, so it
runs before any host is touched (`gpunode check`) and again in the planner.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpunode.versions import compare_dotted, dotted_key, matches_prefix

_RULES = Path(__file__).with_name("rules.yaml")


@cache
def rules() -> dict[str, Any]:
    from ruamel.yaml import YAML

    data: dict[str, Any] = YAML(typ="safe", pure=True).load(_RULES.read_text(encoding="utf-8"))
    return data


def min_driver(cuda: str) -> str | None:
    table: dict[str, str] = rules()["cuda_min_driver"]
    return table.get(_minor(cuda))


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def known_toolkits() -> list[str]:
    return sorted(rules()["cuda_min_driver"], key=dotted_key)


def driver_version(branch: str) -> str | None:
    """The exact driver release the repository serves for a branch."""
    table: dict[str, str] = rules()["driver_releases"]
    return table.get(branch)


def driver_satisfies(branch: str, needed: str) -> bool:
    """Whether a driver branch (its served release, or the branch number) is >= `needed`."""
    have = driver_version(branch) or f"{branch}.999"
    return compare_dotted(have, needed) >= 0


def driver_cuda(driver: str | None) -> str | None:
    """The CUDA version a driver release supports, as nvidia-smi's header shows it."""
    if not driver:
        return None
    table: dict[str, str] = rules()["driver_cuda"]
    return table.get(driver.split(".")[0])


def unversioned(branch: str) -> bool:
    return compare_dotted(branch, rules()["driver_unversioned_from"]) >= 0


def driver_packages(branch: str, flavor: str) -> list[str]:
    """The packages that install a driver branch, in NVIDIA's naming for that branch."""
    if unversioned(branch):
        meta = "nvidia-open" if flavor == "open" else "cuda-drivers"
        return [f"nvidia-driver-pinning-{branch}", meta]
    return [f"nvidia-open-{branch}" if flavor == "open" else f"cuda-drivers-{branch}"]


def driver_userspace_package(branch: str) -> str:
    """The package whose version is the installed user-space driver (libcuda, nvidia-smi)."""
    return "libnvidia-compute" if unversioned(branch) else f"libnvidia-compute-{branch}"


def toolkit_package(cuda: str) -> str:
    return "cuda-toolkit-" + _minor(cuda).replace(".", "-")


def toolkit_ubuntu(cuda: str) -> list[str]:
    table: dict[str, list[str]] = rules()["cuda_ubuntu"]
    return table.get(_minor(cuda), [])


@dataclass(frozen=True)
class PinnedPackage:
    name: str
    version: str


def cudnn_package(cudnn: str, cuda: str) -> PinnedPackage | None:
    major = cudnn.split(".")[0]
    entry = rules()["cudnn"].get(major, {}).get(cuda.split(".")[0])
    return PinnedPackage(entry["package"], entry["version"]) if entry else None


def nccl_build(nccl: str, cuda: str) -> str | None:
    """Full NCCL build for a toolkit: the newest `+cudaX.Y` of the same major not newer than it."""
    builds: list[str] = rules()["nccl_builds"].get(_minor(nccl), [])
    best: tuple[str, str] | None = None
    for build in builds:
        build_cuda = build.rsplit("+cuda", 1)[1]
        if build_cuda.split(".")[0] != cuda.split(".")[0]:
            continue
        if compare_dotted(build_cuda, _minor(cuda)) > 0:
            continue
        if best is None or compare_dotted(build_cuda, best[1]) > 0:
            best = (build, build_cuda)
    return best[0] if best else None


def gpu_arch(model: str) -> str | None:
    table: dict[str, str] = rules()["gpu_arch"]
    for fragment in sorted(table, key=len, reverse=True):
        if fragment.lower() in model.lower():
            return table[fragment]
    return None


def open_modules_supported(model: str) -> bool | None:
    arch = gpu_arch(model)
    if arch is None:
        return None
    order: list[str] = rules()["arch_order"]
    return order.index(arch) >= order.index(rules()["open_modules_min_arch"])


def torch_variants(torch: str) -> list[str]:
    table: dict[str, list[str]] = rules()["torch_variants"]
    return table.get(_minor(torch), [])


def variant_cuda(variant: str) -> str:
    """cu124 -> 12.4, cu130 -> 13.0, cu118 -> 11.8."""
    digits = variant.removeprefix("cu")
    return f"{digits[:-1]}.{digits[-1]}"


def torch_variant(torch: str, cuda: str | None, branch: str | None) -> str | None:
    """The wheel variant for a host: the newest the driver can run, preferring the
    declared toolkit's CUDA and never newer than it when one is declared."""
    usable = [
        v
        for v in torch_variants(torch)
        if branch is None or driver_satisfies(branch, min_driver(variant_cuda(v)) or "0")
    ]
    if cuda is not None:
        same_major = [
            v
            for v in usable
            if variant_cuda(v).split(".")[0] == cuda.split(".")[0]
            and compare_dotted(variant_cuda(v), _minor(cuda)) <= 0
        ]
        usable = same_major or usable
    return max(usable, key=lambda v: dotted_key(variant_cuda(v)), default=None)


def tensorflow_tested(tf: str) -> dict[str, str] | None:
    entry: dict[str, str] | None = rules()["tensorflow_tested"].get(_minor(tf))
    return entry


def newest_toolkit_for(branch: str) -> str | None:
    ok = [c for c in known_toolkits() if driver_satisfies(branch, min_driver(c) or "0")]
    return ok[-1] if ok else None


def oldest_branch_for(cuda: str) -> str | None:
    needed = min_driver(cuda)
    if needed is None:
        return None
    branches: list[str] = sorted(rules()["driver_releases"], key=dotted_key)
    return next((b for b in branches if driver_satisfies(b, needed)), None)


__all__ = ["matches_prefix"]
