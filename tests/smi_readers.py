"""Readers for nvidia-smi outputs that gpunode itself never asks for (`nvidia-smi -L`,
`nvidia-smi -q -x`), and the query list the CSV captures were taken with: the tests read
the real captures and the lab's simulated nvidia-smi with them."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from gpunode.facts.model import NvidiaSmi
from gpunode.facts.smi import failure_message
from gpunode.smiquery import SmiGpu, SmiParseError, convert, gpu_from

# The columns the query-gpu captures in tests/fixtures were taken with (the query list was not
# recorded; inferred from the values: memory.total = memory.free + reserved + memory.used).
CAPTURE_FIELDS = (
    "index", "uuid", "name", "driver_version", "pci.bus_id", "memory.total", "memory.used",
    "memory.free", "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw",
    "power.limit", "clocks.sm", "clocks.mem", "fan.speed", "pstate", "compute_mode",
    "ecc.errors.uncorrected.volatile.total",
)  # fmt: skip

_LIST = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)")


def parse_smi_list(text: str) -> NvidiaSmi:
    """`nvidia-smi -L`: index, name and UUID per GPU."""
    msg = failure_message(text)
    if msg:
        return NvidiaSmi(ok=False, error=msg)
    gpus = [
        SmiGpu(index=int(m.group("index")), name=m.group("name"), uuid=m.group("uuid"))
        for m in (_LIST.match(ln.strip()) for ln in text.splitlines())
        if m
    ]
    return NvidiaSmi(ok=True, gpus=gpus)


def _xml_text(node: ET.Element | None, path: str) -> str:
    found = node.find(path) if node is not None else None
    return (found.text or "").strip() if found is not None else ""


def parse_smi_xml(text: str) -> NvidiaSmi:
    """`nvidia-smi -q -x`."""
    msg = failure_message(text)
    if msg:
        return NvidiaSmi(ok=False, error=msg)
    start = text.find("<nvidia_smi_log")
    if start < 0:
        raise SmiParseError("no <nvidia_smi_log> element")
    try:
        root = ET.fromstring(text[start:])  # skip the DOCTYPE: no external entities
    except ET.ParseError as exc:
        raise SmiParseError(f"nvidia-smi XML: {exc}") from None
    gpus: list[SmiGpu] = []
    for i, g in enumerate(root.findall("gpu")):
        power = g.find("gpu_power_readings")
        if power is None:
            power = g.find("power_readings")
        raw = {
            "name": _xml_text(g, "product_name"),
            "uuid": _xml_text(g, "uuid"),
            "bus_id": g.get("id", "") or _xml_text(g, "pci/pci_bus_id"),
            "memory_total_mib": _xml_text(g, "fb_memory_usage/total"),
            "memory_used_mib": _xml_text(g, "fb_memory_usage/used"),
            "utilization_pct": _xml_text(g, "utilization/gpu_util"),
            "temperature_c": _xml_text(g, "temperature/gpu_temp"),
            "power_draw_w": _xml_text(power, "power_draw")
            or _xml_text(power, "instant_power_draw"),
            "power_limit_w": _xml_text(power, "current_power_limit")
            or _xml_text(power, "power_limit"),
            "sm_clock_mhz": _xml_text(g, "clocks/sm_clock"),
            "persistence_mode": _xml_text(g, "persistence_mode"),
        }
        values: dict[str, Any] = {
            "index": int(_xml_text(g, "minor_number") or i)
            if _xml_text(g, "minor_number").isdigit()
            else i
        }
        for attr, v in raw.items():
            values[attr] = v if attr in ("name", "uuid", "bus_id") else convert(attr, v)
        gpus.append(gpu_from(values, SmiGpu))
    cuda = _xml_text(root, "cuda_version")
    return NvidiaSmi(
        ok=True,
        driver_version=_xml_text(root, "driver_version") or None,
        cuda_version=cuda if cuda and cuda != "N/A" else None,
        gpus=gpus,
    )
