"""Compatibility rules: which stacks can work, and the packages they are named by
(a driver branch's: gpunode.compat.driver).

The data lives in rules.yaml beside this file, each table citing its source.
Everything here is a pure function of that data and the declared stack, so it
runs before any host is touched (`gpunode check`) and again in the planner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpunode import diskmemo
from gpunode.memo import once
from gpunode.versions import dotted_key

_RULES = Path(__file__).with_name("rules.yaml")


@once
def rules() -> dict[str, Any]:
    # parsed once, then kept between runs (gpunode.diskmemo)
    raw = _RULES.read_bytes()
    k = diskmemo.key(diskmemo.code_of(__name__, "ruamel.yaml"), raw)
    data = diskmemo.get("compat", k) if k else None
    if not isinstance(data, dict):
        from ruamel.yaml import YAML

        data = YAML(typ="safe", pure=True).load(raw.decode("utf-8"))
        if k:
            diskmemo.put("compat", k, data)
    assert isinstance(data, dict)
    return data


def min_driver(cuda: str) -> str | None:
    table: dict[str, str] = rules()["cuda_min_driver"]
    return table.get(minor(cuda))


def minor(version: str) -> str:
    """12.4.1 -> 12.4: the tables are keyed by a minor release."""
    return ".".join(version.split(".")[:2])


def known_toolkits() -> list[str]:
    return sorted(rules()["cuda_min_driver"], key=dotted_key)


def toolkit_package(cuda: str) -> str:
    return "cuda-toolkit-" + minor(cuda).replace(".", "-")


def toolkit_ubuntu(cuda: str) -> list[str]:
    table: dict[str, list[str]] = rules()["cuda_ubuntu"]
    return table.get(minor(cuda), [])


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
        if _squeezed(fragment) in _squeezed(model):
            return table[fragment]
    return None


def _squeezed(name: str) -> str:
    """RTX 4090, RTX-4090 and rtx4090 are one model."""
    return "".join(c for c in name.lower() if c not in " -_")


def known_gpu_models() -> list[str]:
    """The GPU models the table knows (a model naming one of them is known)."""
    return list(rules()["gpu_arch"])


def open_modules_supported(model: str) -> bool | None:
    arch = gpu_arch(model)
    if arch is None:
        return None
    order: list[str] = rules()["arch_order"]
    return order.index(arch) >= order.index(rules()["open_modules_min_arch"])


def torch_variants(torch: str) -> list[str]:
    table: dict[str, list[str]] = rules()["torch_variants"]
    return table.get(minor(torch), [])


def variant_cuda(variant: str) -> str:
    """cu124 -> 12.4, cu130 -> 13.0, cu118 -> 11.8."""
    digits = variant.removeprefix("cu")
    return f"{digits[:-1]}.{digits[-1]}"


def tensorflow_tested(tf: str) -> dict[str, str] | None:
    entry: dict[str, str] | None = rules()["tensorflow_tested"].get(minor(tf))
    return entry


def torch_release(torch: str) -> str:
    """2.7 -> 2.7.0: pip reads `torch==2.7` as 2.7.0, and the companion table is keyed so."""
    parts = torch.split(".")
    return ".".join(parts + ["0"] * (3 - len(parts)))


def torch_companions(torch: str) -> dict[str, str] | None:
    """torchvision's and torchaudio's releases built with a PyTorch release."""
    entry: dict[str, str] | None = rules()["torch_companions"].get(torch_release(torch))
    return entry


def torch_releases(torch: str) -> list[str]:
    """The releases of a PyTorch release's minor, oldest first: 2.7.9 -> 2.7.0, 2.7.1."""
    table: dict[str, Any] = rules()["torch_companions"]
    return sorted((r for r in table if minor(r) == minor(torch)), key=dotted_key)


def torch_python(torch: str) -> tuple[str, str] | None:
    """The lowest and highest Python series a PyTorch release has wheels for."""
    entry: list[str] | None = rules()["torch_python"].get(minor(torch))
    return (entry[0], entry[1]) if entry else None


def torch_for_python(python: str) -> str | None:
    """The oldest PyTorch minor with wheels for a Python series."""
    table: dict[str, list[str]] = rules()["torch_python"]
    fits = [
        t for t, (lo, hi) in table.items() if dotted_key(lo) <= dotted_key(python) <= dotted_key(hi)
    ]
    return min(fits, key=dotted_key) if fits else None


def tensorrt_packages(tensorrt: str, cuda: str) -> dict[str, list[str]] | None:
    """TensorRT's Debian packages for a TensorRT major and a CUDA toolkit, by part (runtime,
    dev, python, hold); None where the major has no packages for the toolkit's CUDA major."""
    entry = rules()["tensorrt_packages"].get(tensorrt.split(".")[0])
    if entry is None or cuda.split(".")[0] not in entry["cuda_majors"]:
        return None
    return {part: list(entry[part]) for part in ("runtime", "dev", "python", "hold")}


def tensorrt_majors(cuda: str) -> list[str]:
    """The TensorRT majors that have packages for a CUDA toolkit's major."""
    table: dict[str, dict[str, Any]] = rules()["tensorrt_packages"]
    return [m for m, e in table.items() if cuda.split(".")[0] in e["cuda_majors"]]
