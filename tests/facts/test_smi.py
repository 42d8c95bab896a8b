"""nvidia-smi parsers against real captures from H200 hosts (tests/fixtures/facts/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.facts.smi import QUERY_FIELDS, SmiParseError, parse_query_csv, parse_smi_table
from tests.smi_readers import CAPTURE_FIELDS, parse_smi_list, parse_smi_xml

FIX = Path(__file__).parent.parent / "fixtures" / "facts"
ONE = FIX / "h200-ubuntu2404"
TWO = FIX / "h200x2-ubuntu2404"


def test_table_one_gpu() -> None:
    smi = parse_smi_table((ONE / "nvidia-smi.txt").read_text())
    assert smi.ok and smi.driver_version == "580.159.04" and smi.cuda_version == "13.0"
    (g,) = smi.gpus
    assert (g.index, g.name, g.bus_id) == (0, "NVIDIA H200", "00000000:00:06.0")
    assert (g.memory_total_mib, g.memory_used_mib) == (143771, 0)
    assert (g.temperature_c, g.power_draw_w, g.power_limit_w) == (40, 129, 700)
    assert g.persistence_mode is True and g.utilization_pct == 0


def test_table_two_gpus() -> None:
    smi = parse_smi_table((TWO / "nvidia-smi.txt").read_text())
    assert [g.bus_id for g in smi.gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert [g.temperature_c for g in smi.gpus] == [37, 36]


def test_xml_matches_table() -> None:
    for d in (ONE, TWO):
        x = parse_smi_xml((d / "nvidia-smi-q.xml").read_text())
        t = parse_smi_table((d / "nvidia-smi.txt").read_text())
        assert (x.driver_version, x.cuda_version) == (t.driver_version, t.cuda_version)
        assert [(g.index, g.name, g.bus_id, g.memory_total_mib) for g in x.gpus] == [
            (g.index, g.name, g.bus_id, g.memory_total_mib) for g in t.gpus
        ]
        assert all(g.uuid.startswith("GPU-") and g.power_limit_w == 700 for g in x.gpus)
        assert all(g.sm_clock_mhz and g.sm_clock_mhz > 0 for g in x.gpus)
    x = parse_smi_xml((ONE / "nvidia-smi-q.xml").read_text())
    assert x.gpus[0].uuid == "GPU-a6e89c80-9928-a727-7385-cf717c71b09b"
    assert x.gpus[0].temperature_c == 40 and x.gpus[0].sm_clock_mhz == 1980


def test_list_from_the_x2_capture() -> None:
    raw = (TWO / "host-facts.txt").read_text()
    block = raw.split("## nvidia-smi -L\n", 1)[1].split("##", 1)[0]
    smi = parse_smi_list(block)
    assert [(g.index, g.uuid) for g in smi.gpus] == [
        (0, "GPU-4535bd70-a68d-8e9d-5e87-ae20fb0ab3da"),
        (1, "GPU-b04010c1-7166-6096-5d84-4ad10eafff39"),
    ]


def test_query_with_header_and_units() -> None:
    smi = parse_query_csv((ONE / "query-gpu-header.csv").read_text())
    assert smi.driver_version == "580.159.04"
    assert smi.gpus[0].memory_total_mib == 143771 and smi.gpus[0].name == "NVIDIA H200"


def test_query_noheader_nounits_capture() -> None:
    smi = parse_query_csv((TWO / "query-gpu.csv").read_text(), CAPTURE_FIELDS)
    assert [g.uuid for g in smi.gpus] == [
        "GPU-4535bd70-a68d-8e9d-5e87-ae20fb0ab3da",
        "GPU-b04010c1-7166-6096-5d84-4ad10eafff39",
    ]
    assert smi.gpus[1].power_draw_w == pytest.approx(80.07)
    assert smi.gpus[0].sm_clock_mhz == 345


def test_query_with_units_but_no_header() -> None:
    text = "0, NVIDIA H200, 143771 MiB, 12 %, 129.36 W, [N/A], Enabled\n"
    fields = ["index", "name", "memory.total", "utilization.gpu", "power.draw", "power.limit",
              "persistence_mode"]  # fmt: skip
    (g,) = parse_query_csv(text, fields).gpus
    assert g.memory_total_mib == 143771 and g.utilization_pct == 12
    assert g.power_draw_w == pytest.approx(129.36) and g.power_limit_w is None
    assert g.persistence_mode is True


def test_query_fields_used_by_facts() -> None:
    line = (
        "0, NVIDIA H200, GPU-a6e89c80-9928-a727-7385-cf717c71b09b, 00000000:00:06.0, 143771, 0, 0,"
        " 40, 129.36, 700.00, 1980, Enabled, 580.159.04\n"
    )
    smi = parse_query_csv(line, QUERY_FIELDS)
    assert smi.driver_version == "580.159.04" and smi.gpus[0].sm_clock_mhz == 1980


@pytest.mark.parametrize(
    "text",
    [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure"
        " that the latest NVIDIA driver is installed and running.\n",
        "Failed to initialize NVML: Driver/library version mismatch\n"
        "NVML library version: 580.95\n",
    ],
)
def test_failures_are_reported_not_raised(text: str) -> None:
    for parse in (parse_smi_table, parse_smi_list, parse_smi_xml):
        smi = parse(text)
        assert not smi.ok and smi.error == text.splitlines()[0].strip()
    assert not parse_query_csv(text, QUERY_FIELDS).ok


def test_garbage_raises_clear_error() -> None:
    with pytest.raises(SmiParseError, match="Driver Version"):
        parse_smi_table("hello")
    with pytest.raises(SmiParseError, match="columns"):
        parse_query_csv("0\n", ["index", "name"])
