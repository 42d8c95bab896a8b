"""Compatibility rules: which stacks can work, and the packages they are named by
(a driver branch's: gpunode.compat.driver).

The data lives in rules.yaml beside this file, each table citing its source.
Everything here is a pure function of that data and the declared stack, so it
runs before any host is touched (`gpunode check`) and again in the planner.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from gpunode.versions import compare_dotted, dotted_key

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


def driver_satisfies(branch: str, needed: str, release: str | None = None) -> bool:
    """Whether a driver is >= `needed`: the exact `release` when one is pinned or installed,
    else the branch (its newest release is; which releases exist, the repository says)."""
    if release is not None:
        return compare_dotted(release, needed) >= 0
    return compare_dotted(branch, needed.split(".")[0]) >= 0


def toolkit_package(cuda: str) -> str:
    return "cuda-toolkit-" + _minor(cuda).replace(".", "-")


def toolkit_ubuntu(cuda: str) -> list[str]:
    table: dict[str, list[str]] = rules()["cuda_ubuntu"]
    return table.get(_minor(cuda), [])


def cudnn_names(cudnn: str, cuda: str) -> tuple[str, str] | None:
    """cuDNN's runtime and development packages for a cuDNN major and a CUDA toolkit."""
    entry = rules()["cudnn_packages"].get(cudnn.split(".")[0])
    major = cuda.split(".")[0]
    if entry is None or major not in entry["cuda_majors"]:
        return None
    return entry["runtime"].format(cuda_major=major), entry["dev"].format(cuda_major=major)


def cudnn_majors(cuda: str) -> list[str]:
    """The cuDNN majors that have packages for a CUDA toolkit's major."""
    table: dict[str, dict[str, Any]] = rules()["cudnn_packages"]
    return [m for m, e in table.items() if cuda.split(".")[0] in e["cuda_majors"]]


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


def torch_variant(
    torch: str, cuda: str | None, branch: str | None, release: str | None = None
) -> str | None:
    """The wheel variant for a host: the newest the driver can run, preferring the
    declared toolkit's CUDA and never newer than it when one is declared."""
    usable = [
        v
        for v in torch_variants(torch)
        if branch is None or driver_satisfies(branch, min_driver(variant_cuda(v)) or "0", release)
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
