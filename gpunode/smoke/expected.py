"""What each GPU model should measure, and how a measurement is graded.

Peaks are the vendor's datasheet figures: dense (no structured sparsity)
tensor-core TFLOP/s, memory bandwidth, and the GPU's interconnect bandwidth
(NVLink where the part has it, else PCIe), both directions together. A test
does not reach a datasheet peak, so each metric expects a typical fraction of
it (`EFFICIENCY`, calibrated on H200 measurements) unless the model carries
its own measured reference; a result passes at `PASS_FRACTION` of the
expectation and warns down to `WARN_FRACTION`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "warn", "fail", "skip"]
Metric = Literal["bf16_tflops", "fp16_tflops", "tf32_tflops", "copy_tbs", "allreduce_busbw_gbs"]

PASS_FRACTION = 0.90
WARN_FRACTION = 0.60

# Typical share of the datasheet peak that these tests reach. Calibrated on the H200:
# cuBLAS 8192^3 bf16 773 of 989 TFLOP/s (0.78; clocks settle below boost under load),
# a device copy 4.29 of 4.8 TB/s (0.89), a 2-GPU NCCL all-reduce busbw 324 GB/s over
# 900 GB/s of NVLink both ways, i.e. 450 one way (0.72).
EFFICIENCY: dict[Metric, float] = {
    "bf16_tflops": 0.78,
    "fp16_tflops": 0.78,
    "tf32_tflops": 0.78,
    "copy_tbs": 0.89,
    "allreduce_busbw_gbs": 0.72,
}


@dataclass(frozen=True)
class GpuSpec:
    name: str
    matches: tuple[str, ...]
    """Regular expressions, searched in the lower-cased name nvidia-smi or torch reports."""
    bf16_tflops: float
    fp16_tflops: float
    tf32_tflops: float
    memory_tbs: float
    link_gbs: float
    """Interconnect per GPU, both directions (NVLink, or PCIe for parts without it)."""
    source: str
    measured: dict[Metric, float] = field(default_factory=dict)
    """References measured with this suite, preferred over datasheet x efficiency."""

    def peak(self, metric: Metric) -> float:
        if metric == "copy_tbs":
            return self.memory_tbs
        if metric == "allreduce_busbw_gbs":
            return self.link_gbs / 2  # busbw compares with one direction of the links
        value: float = getattr(self, metric)
        return value

    def expected(self, metric: Metric) -> float:
        if metric in self.measured:
            return self.measured[metric]
        return round(self.peak(metric) * EFFICIENCY[metric], 2)


# Order matters: the first match wins, so specific names come before general ones.
SPECS: tuple[GpuSpec, ...] = (
    # https://www.nvidia.com/en-us/data-center/h200/ (H200 NVL: FP16/BF16 1,671 and TF32 835
    # sparse; 4.8 TB/s; NVLink bridge 900 GB/s)
    GpuSpec(
        "H200 NVL",
        (r"h200.*nvl",),
        835,
        835,
        418,
        4.8,
        900,
        "https://www.nvidia.com/en-us/data-center/h200/",
    ),
    # https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM: FP16/BF16 1,979 and TF32 989
    # TFLOPS with sparsity, i.e. 989 and 494 dense; 4.8 TB/s HBM3e; NVLink 900 GB/s)
    GpuSpec(
        "H200",
        (r"\bh200\b",),
        989,
        989,
        494,
        4.8,
        900,
        "https://www.nvidia.com/en-us/data-center/h200/",
        # Measured here on H200 machines, driver 580.159.04, PyTorch 2.11 cu130 (docs/hardware.md).
        measured={"bf16_tflops": 773, "copy_tbs": 4.29, "allreduce_busbw_gbs": 324},
    ),
    # https://www.nvidia.com/en-us/data-center/h100/ (H100 NVL: FP16/BF16 1,671 and TF32 835
    # sparse; 3.9 TB/s; NVLink bridge 600 GB/s)
    GpuSpec(
        "H100 NVL",
        (r"h100.*nvl",),
        835,
        835,
        418,
        3.9,
        600,
        "https://www.nvidia.com/en-us/data-center/h100/",
    ),
    # Same page (H100 PCIe: FP16/BF16 1,513 and TF32 756 sparse; 2.0 TB/s; NVLink 600 GB/s)
    GpuSpec(
        "H100 PCIe",
        (r"h100.*pcie",),
        756,
        756,
        378,
        2.0,
        600,
        "https://www.nvidia.com/en-us/data-center/h100/",
    ),
    # Same page (H100 SXM: FP16/BF16 1,979 and TF32 989 sparse; 3.35 TB/s; NVLink 900 GB/s).
    # nvidia-smi names it "NVIDIA H100 80GB HBM3".
    GpuSpec(
        "H100 SXM",
        (r"h100.*(sxm|hbm3)", r"\bh100\b"),
        989,
        989,
        494,
        3.35,
        900,
        "https://www.nvidia.com/en-us/data-center/h100/",
    ),
    # https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
    # (A100: BF16/FP16 312, TF32 156 dense; 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s,
    # 40GB PCIe 1,555 GB/s; NVLink 600 GB/s, PCIe Gen4 64 GB/s)
    GpuSpec(
        "A100 SXM 80GB",
        (r"a100.*sxm.*80",),
        312,
        312,
        156,
        2.039,
        600,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    ),
    GpuSpec(
        "A100 SXM 40GB",
        (r"a100.*sxm",),
        312,
        312,
        156,
        1.555,
        600,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    ),
    # A100 PCIe: the NVLink bridge is optional, so grade against PCIe Gen4 (64 GB/s).
    GpuSpec(
        "A100 PCIe 80GB",
        (r"a100.*80.*pcie", r"a100.*pcie.*80"),
        312,
        312,
        156,
        1.935,
        64,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    ),
    GpuSpec(
        "A100 PCIe",
        (r"a100.*pcie", r"\ba100\b"),
        312,
        312,
        156,
        1.555,
        64,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    ),
    # https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413 (L40S: BF16/FP16 362.05,
    # TF32 183 dense; 864 GB/s; PCIe Gen4 x16 64 GB/s, no NVLink)
    GpuSpec(
        "L40S",
        (r"\bl40s\b",),
        362,
        362,
        183,
        0.864,
        64,
        "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413",
    ),
    # https://www.nvidia.com/en-us/data-center/l4/ (L4: FP16/BF16 242 and TF32 120 sparse;
    # 300 GB/s; PCIe Gen4 x16 64 GB/s)
    GpuSpec(
        "L4", (r"\bl4\b",), 121, 121, 60, 0.3, 64, "https://www.nvidia.com/en-us/data-center/l4/"
    ),
    # https://www.nvidia.com/en-us/data-center/products/a10-gpu/ (A10: BF16/FP16 125 and TF32
    # 62.5 dense; 600 GB/s; PCIe Gen4 64 GB/s)
    GpuSpec(
        "A10",
        (r"\ba10\b",),
        125,
        125,
        62.5,
        0.6,
        64,
        "https://www.nvidia.com/en-us/data-center/products/a10-gpu/",
    ),
    # https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf
    # (RTX 4090, appendix table: FP16/BF16 tensor with FP32 accumulate 165.2 dense -- the rate
    # PyTorch's matmuls use --, TF32 82.6 dense; 1,008 GB/s; PCIe Gen4 64 GB/s, no NVLink)
    GpuSpec(
        "RTX 4090",
        (r"rtx 4090",),
        165.2,
        165.2,
        82.6,
        1.008,
        64,
        "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
    ),
)


def lookup(name: str | None) -> GpuSpec | None:
    """The spec for a name as nvidia-smi or torch reports it, or as an inventory writes it."""
    if not name:
        return None
    text = " ".join(name.lower().replace("-", " ").replace("_", " ").split())
    for spec in SPECS:
        if text == spec.name.lower():
            return spec
    for spec in SPECS:
        if any(re.search(p.replace("-", " "), text) for p in spec.matches):
            return spec
    return None


def _tokens(name: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", name.lower())) - {"nvidia"}


def same_model(reported: str, declared: str) -> bool:
    """Does the GPU a host reports ("NVIDIA H100 80GB HBM3") match what the inventory declares?

    Every word declared appears in the reported name ("H100" matches any H100), or both
    names are the same row of the table ("H100 SXM" is what nvidia-smi calls "80GB HBM3").
    """
    if _tokens(declared) <= _tokens(reported):
        return True
    want, got = lookup(declared), lookup(reported)
    return want is not None and want == got


def grade(value: float, expected: float) -> Status:
    """pass at PASS_FRACTION of the expectation or more, warn down to WARN_FRACTION, else fail."""
    if expected <= 0:
        raise ValueError(f"expected must be positive, got {expected}")
    ratio = value / expected
    if ratio >= PASS_FRACTION:
        return "pass"
    if ratio >= WARN_FRACTION:
        return "warn"
    return "fail"


def grade_result(result: dict[str, Any], declared_model: str | None = None) -> dict[str, Any]:
    """A result as the host printed it, with the expectation and grade filled in.

    Only measurements (details.metric) of a model in the table are graded, and only
    when the host's own check passed: a wrong answer stays failed however fast it was.
    """
    out = dict(result)
    details = out.get("details") or {}
    if out.get("name") == "nvidia-smi/gpus" and declared_model:
        return _check_models(out, details.get("gpus") or [], declared_model)
    metric = details.get("metric")
    value = out.get("value")
    if (
        metric not in EFFICIENCY
        or not isinstance(value, (int, float))
        or details.get("graded") is False
    ):
        return out
    spec = lookup(details.get("gpu")) or lookup(declared_model)
    if spec is None:
        out["reason"] = f"{out.get('reason', '')}; no expectation for {details.get('gpu')!r}"
        return out
    expected = spec.expected(metric)
    out["expected"] = expected
    if out.get("status") == "pass":
        out["status"] = grade(float(value), expected)
        if out["status"] != "pass":
            pct = 100 * float(value) / expected
            out["reason"] = (
                f"{pct:.0f}% of the {expected:g} {out.get('unit', '')} expected "
                f"of an {spec.name}; {out.get('reason', '')}"
            )
    return out


def _check_models(out: dict[str, Any], gpus: list[dict[str, Any]], declared: str) -> dict[str, Any]:
    wrong = [g for g in gpus if not same_model(str(g.get("name", "")), declared)]
    if wrong:
        out["status"] = "fail"
        names = ", ".join(f"GPU {g.get('index', '?')} is {g.get('name')!r}" for g in wrong)
        out["reason"] = f"{names}; the inventory declares {declared!r}"
    return out
