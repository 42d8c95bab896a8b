"""Parsers for nvidia-smi's outputs, into the same `NvidiaSmi` / `SmiGpu` shapes.

Handles the plain table (`nvidia-smi`), `nvidia-smi -L`, `--query-gpu` CSV (with or
without header and units) and `nvidia-smi -q -x`. The lab's fake GPU, fact gathering
and the monitor all read nvidia-smi through these.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from gpunode.facts.model import NvidiaSmi, SmiGpu
from gpunode.smivalues import is_missing

QUERY_FIELDS = (
    "index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "utilization.gpu",
    "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "persistence_mode",
    "driver_version",
)  # fmt: skip
"""What fact gathering asks for (`--query-gpu=` + ",".join(QUERY_FIELDS))."""

# query field (or the name nvidia-smi prints in its CSV header) -> SmiGpu attribute
_FIELD_ATTR = {
    "index": "index",
    "name": "name",
    "uuid": "uuid",
    "pci.bus_id": "bus_id",
    "memory.total": "memory_total_mib",
    "memory.used": "memory_used_mib",
    "utilization.gpu": "utilization_pct",
    "temperature.gpu": "temperature_c",
    "power.draw": "power_draw_w",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "persistence_mode": "persistence_mode",
}
_INT_ATTRS = {"index", "memory_total_mib", "memory_used_mib"}
_FLOAT_ATTRS = {"utilization_pct", "temperature_c", "power_draw_w", "power_limit_w",
                "sm_clock_mhz"}  # fmt: skip
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")

FAILURE_HINTS = (
    "NVIDIA-SMI has failed",
    "Failed to initialize NVML",
    "No devices were found",
    "couldn't communicate with the NVIDIA driver",
    "Driver/library version mismatch",
)


class SmiParseError(ValueError):
    pass


def failure_message(text: str) -> str | None:
    """nvidia-smi's own explanation when it could not talk to the driver, else None."""
    for line in text.splitlines():
        if any(h in line for h in FAILURE_HINTS):
            return line.strip()
    return None


def _convert(attr: str, raw: str) -> Any:
    if is_missing(raw):
        return None
    v = raw.strip()
    if attr == "persistence_mode":
        return v.lower() in ("enabled", "on", "1", "yes")
    if attr in _INT_ATTRS or attr in _FLOAT_ATTRS:
        m = _NUMBER.search(v)
        if m is None:
            raise SmiParseError(f"{attr}: not a number: {v!r}")
        num = float(m.group())
        if attr in _INT_ATTRS:
            if attr != "index" and re.search(r"GiB", v):
                num *= 1024
            return int(num)
        return num
    return v


def _gpu(values: dict[str, Any]) -> SmiGpu:
    clean = {k: v for k, v in values.items() if v is not None}
    if "index" not in clean or "name" not in clean:
        raise SmiParseError(f"a GPU row needs index and name: {values}")
    return SmiGpu(**clean)


def parse_query_csv(text: str, fields: Sequence[str] | None = None) -> NvidiaSmi:
    """`--query-gpu=...` output. `fields` is the query list (needed when there is no header)."""
    msg = failure_message(text)
    if msg:
        return NvidiaSmi(ok=False, error=msg)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    names = list(fields) if fields is not None else None
    first = lines[0].split(",")[0].strip() if lines else ""
    if re.fullmatch(r"[a-z_.]+(\s*\[.*\])?", first):  # a header: lowercase field names
        header = [c.strip() for c in lines[0].split(",")]
        names = [re.sub(r"\s*\[.*\]$", "", h) for h in header]
        lines = lines[1:]
    if names is None:
        raise SmiParseError("CSV without a header: pass the query fields")
    gpus: list[SmiGpu] = []
    driver = None
    for ln in lines:
        cols = [c.strip() for c in ln.split(",")]
        if len(cols) != len(names):
            # a GPU name could hold a comma; join the surplus into the name column
            if len(cols) > len(names) and "name" in names:
                i = names.index("name")
                extra = len(cols) - len(names)
                cols[i : i + extra + 1] = [", ".join(cols[i : i + extra + 1])]
            else:
                raise SmiParseError(f"{len(cols)} columns, expected {len(names)}: {ln!r}")
        values: dict[str, Any] = {}
        for name, raw in zip(names, cols, strict=True):
            if name == "driver_version":
                driver = None if is_missing(raw) else raw
            attr = _FIELD_ATTR.get(name)
            if attr is not None:
                values[attr] = _convert(attr, raw)
        gpus.append(_gpu(values))
    return NvidiaSmi(ok=True, driver_version=driver, gpus=gpus)


_HEADER = re.compile(
    r"Driver Version:\s*(?P<driver>[\d.]+)(?:.*?CUDA Version:\s*(?P<cuda>[\d.]+|N/A))?"
)
_ROW1 = re.compile(
    r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<pers>On|Off)\s+\|\s+(?P<bus>[0-9A-Fa-f:.]+)"
)
_ROW2 = re.compile(
    r"^\|\s+(?:\S+)\s+(?P<temp>\d+C|N/A)\s+\S+\s+(?P<draw>\d+W|N/A)\s*/\s*(?P<cap>\d+W|N/A)\s+\|"
    r"\s+(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s+\|\s+(?P<util>\d+%|N/A)"
)


def parse_smi_table(text: str) -> NvidiaSmi:
    """Plain `nvidia-smi`: driver and CUDA version from the header, one SmiGpu per row."""
    msg = failure_message(text)
    if msg:
        return NvidiaSmi(ok=False, error=msg)
    head = _HEADER.search(text)
    if head is None:
        raise SmiParseError("no 'Driver Version:' header in nvidia-smi output")
    cuda = head.group("cuda")
    gpus: list[SmiGpu] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _ROW1.match(line)
        if not m or i + 1 >= len(lines):
            continue
        m2 = _ROW2.match(lines[i + 1])
        values: dict[str, Any] = {
            "index": int(m.group("index")),
            "name": m.group("name"),
            "bus_id": m.group("bus"),
            "persistence_mode": m.group("pers") == "On",
        }
        if m2:
            values.update(
                temperature_c=_convert("temperature_c", m2.group("temp")),
                power_draw_w=_convert("power_draw_w", m2.group("draw")),
                power_limit_w=_convert("power_limit_w", m2.group("cap")),
                memory_used_mib=int(m2.group("used")),
                memory_total_mib=int(m2.group("total")),
                utilization_pct=_convert("utilization_pct", m2.group("util")),
            )
        gpus.append(_gpu(values))
    return NvidiaSmi(
        ok=True,
        driver_version=head.group("driver"),
        cuda_version=None if cuda in (None, "N/A") else cuda,
        gpus=gpus,
    )


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
            values[attr] = v if attr in ("name", "uuid", "bus_id") else _convert(attr, v)
        gpus.append(_gpu(values))
    cuda = _xml_text(root, "cuda_version")
    return NvidiaSmi(
        ok=True,
        driver_version=_xml_text(root, "driver_version") or None,
        cuda_version=cuda if cuda and cuda != "N/A" else None,
        gpus=gpus,
    )
