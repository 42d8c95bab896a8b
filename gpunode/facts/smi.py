"""Parsers for what fact gathering reads from nvidia-smi, into `NvidiaSmi` / `SmiGpu`.

The plain table (`nvidia-smi`) here; `--query-gpu` CSV (with or without header and units)
through gpunode.smiquery, the parser the monitor uses too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gpunode.facts.model import NvidiaSmi
from gpunode.smiquery import SmiGpu, SmiParseError, convert, gpu_from, parse_csv

QUERY_FIELDS = (
    "index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "utilization.gpu",
    "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "persistence_mode",
    "driver_version",
)  # fmt: skip
"""What fact gathering asks for (`--query-gpu=` + ",".join(QUERY_FIELDS))."""

FAILURE_HINTS = (
    "NVIDIA-SMI has failed",
    "Failed to initialize NVML",
    "No devices were found",
    "couldn't communicate with the NVIDIA driver",
    "Driver/library version mismatch",
)

__all__ = ["QUERY_FIELDS", "SmiParseError", "failure_message", "parse_query_csv", "parse_smi_table"]


def failure_message(text: str) -> str | None:
    """nvidia-smi's own explanation when it could not talk to the driver, else None."""
    for line in text.splitlines():
        if any(h in line for h in FAILURE_HINTS):
            return line.strip()
    return None


def parse_query_csv(text: str, fields: Sequence[str] | None = None) -> NvidiaSmi:
    """`--query-gpu=...` output (gpunode.smiquery's parser) with nvidia-smi's own failure
    message and the driver's version. `fields` is the query list (needed without a header)."""
    msg = failure_message(text)
    if msg:
        return NvidiaSmi(ok=False, error=msg)
    gpus = parse_csv(text, fields)
    driver = next((g.driver_version for g in gpus if g.driver_version), None)
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
        gpus.append(gpu_from(values, SmiGpu))
    return NvidiaSmi(
        ok=True,
        driver_version=head.group("driver"),
        cuda_version=None if cuda in (None, "N/A") else cuda,
        gpus=gpus,
    )
