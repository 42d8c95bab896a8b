"""The per-model table and grading: pure functions, checked at their boundaries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpunode.smoke import expected
from gpunode.smoke.expected import SPECS, grade, grade_result, lookup, same_model

HARDWARE = Path(__file__).parent.parent / "fixtures" / "hardware"


@pytest.mark.parametrize(
    ("reported", "model"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        # As an inventory writes them.
        ("H200", "H200"),
        ("h100 sxm", "H100 SXM"),
        ("A100 PCIe 80GB", "A100 PCIe 80GB"),
    ],
)
def test_lookup_names_as_reported(reported: str, model: str) -> None:
    spec = lookup(reported)
    assert spec is not None and spec.name == model


@pytest.mark.parametrize("name", ["NVIDIA L40", "Tesla T4", "NVIDIA A100X", "", None])
def test_lookup_unknown_models_have_no_expectation(name: str | None) -> None:
    assert lookup(name) is None


def test_the_name_the_real_h200_reports_is_in_the_table() -> None:
    data = json.loads(
        (HARDWARE / "h200x1" / "smoke.json").read_text().split("\n", 1)[1].rsplit("[exit", 1)[0]
    )
    cuda = next(r for r in data["hosts"][0]["results"] if r["name"] == "torch/cuda")
    (name,) = cuda["details"]["names"]
    assert lookup(name) is not None and lookup(name).name == "H200"  # type: ignore[union-attr]


def test_h200_expects_the_reference_measured_on_these_machines() -> None:
    h200 = lookup("NVIDIA H200")
    assert h200 is not None
    assert h200.expected("bf16_tflops") == 773
    assert h200.expected("copy_tbs") == 4.29
    assert h200.expected("allreduce_busbw_gbs") == 324
    # Without a measured reference: datasheet peak x typical efficiency.
    assert h200.expected("tf32_tflops") == round(494 * expected.EFFICIENCY["tf32_tflops"], 2)
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    assert h100.expected("copy_tbs") == round(3.35 * expected.EFFICIENCY["copy_tbs"], 2)
    # busbw compares with one direction of the links: 900 GB/s both ways -> 450.
    assert h100.peak("allreduce_busbw_gbs") == 450


def test_every_spec_cites_an_nvidia_source_in_the_table_file() -> None:
    text = Path(expected.__file__).read_text()
    for spec in SPECS:
        assert re.match(r"https://(www|images|resources)\.nvidia\.com/", spec.source), spec.name
        assert spec.source.split("/")[2] in text
        # Dense figures: fp16/bf16 tensor rate is twice TF32's on every part listed.
        assert spec.bf16_tflops == pytest.approx(2 * spec.tf32_tflops, rel=0.02), spec.name


@pytest.mark.parametrize(
    ("value", "status"),
    [
        (773, "pass"),
        (696, "pass"),
        (695, "warn"),
        (464, "warn"),
        (463, "fail"),
        (0, "fail"),
        (900, "pass"),
    ],
)
def test_grade_thresholds(value: float, status: str) -> None:
    # 0.9 x 773 = 695.7; 0.6 x 773 = 463.8
    assert grade(value, 773) == status


def test_grade_refuses_a_non_positive_expectation() -> None:
    with pytest.raises(ValueError, match="positive"):
        grade(1.0, 0)


def _measured(value: float, status: str = "pass", gpu: str = "NVIDIA H200") -> dict[str, object]:
    return {
        "name": "torch/matmul-bf16",
        "status": status,
        "reason": "8192^3",
        "value": value,
        "expected": None,
        "unit": "TFLOP/s",
        "seconds": 1.0,
        "env": "system",
        "details": {"metric": "bf16_tflops", "gpu": gpu},
    }


def test_grade_result_fills_expected_and_downgrades_slow_results() -> None:
    out = grade_result(_measured(600))
    assert out["expected"] == 773 and out["status"] == "warn"
    assert "78% of the 773 TFLOP/s expected of an H200" in out["reason"]
    assert grade_result(_measured(760))["status"] == "pass"
    assert grade_result(_measured(100))["status"] == "fail"


def test_grade_result_never_upgrades_a_failed_check() -> None:
    out = grade_result(_measured(900, status="fail"))
    assert out["status"] == "fail" and out["expected"] == 773


def test_grade_result_unknown_gpu_falls_back_to_the_declared_model() -> None:
    out = grade_result(_measured(300, gpu="NVIDIA Mystery"))
    assert out["expected"] is None and out["status"] == "pass"
    assert "no expectation for 'NVIDIA Mystery'" in out["reason"]
    out = grade_result(_measured(300, gpu="NVIDIA Mystery"), declared_model="A100 SXM 80GB")
    assert out["expected"] == round(312 * 0.78, 2) and out["status"] == "pass"


def test_grade_result_leaves_ungraded_sizes_alone() -> None:
    small = {
        "name": "nccl-allreduce/64MiB",
        "status": "pass",
        "value": 120.0,
        "unit": "GB/s",
        "details": {"metric": "allreduce_busbw_gbs", "gpu": "NVIDIA H200", "graded": False},
    }
    assert grade_result(small) == small


def test_declared_model_is_checked_against_every_listed_gpu() -> None:
    listed = {
        "name": "nvidia-smi/gpus",
        "status": "pass",
        "reason": "NVIDIA H200",
        "value": 2,
        "details": {
            "gpus": [{"index": "0", "name": "NVIDIA H200"}, {"index": "1", "name": "NVIDIA H200"}]
        },
    }
    assert grade_result(listed, "H200")["status"] == "pass"
    wrong = grade_result(listed, "A100 SXM 80GB")
    assert wrong["status"] == "fail"
    assert "GPU 0 is 'NVIDIA H200'" in wrong["reason"] and "'A100 SXM 80GB'" in wrong["reason"]


def test_same_model() -> None:
    assert same_model("NVIDIA H100 80GB HBM3", "H100")
    assert same_model("NVIDIA H100 80GB HBM3", "H100 SXM")
    assert not same_model("NVIDIA H100 PCIe", "H100 SXM")
    assert not same_model("NVIDIA L40S", "L4")
