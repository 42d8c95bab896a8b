"""Parsers for what fact gathering reads from nvidia-smi, into `NvidiaSmi` / `SmiGpu`.

Handles the plain table (`nvidia-smi`) and `--query-gpu` CSV (with or without header and
units).
"""

from __future__ import annotations

import re
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


def convert(attr: str, raw: str) -> Any:
    """One raw nvidia-smi value as the type of SmiGpu's `attr` (None when missing)."""
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


def gpu_from(values: dict[str, Any]) -> SmiGpu:
    """An SmiGpu from converted values; index and name are required."""
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
                values[attr] = convert(attr, raw)
        gpus.append(gpu_from(values))
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
                temperature_c=convert("temperature_c", m2.group("temp")),
                power_draw_w=convert("power_draw_w", m2.group("draw")),
                power_limit_w=convert("power_limit_w", m2.group("cap")),
                memory_used_mib=int(m2.group("used")),
                memory_total_mib=int(m2.group("total")),
                utilization_pct=convert("utilization_pct", m2.group("util")),
            )
        gpus.append(gpu_from(values))
    return NvidiaSmi(
        ok=True,
        driver_version=head.group("driver"),
        cuda_version=None if cuda in (None, "N/A") else cuda,
        gpus=gpus,
    )
