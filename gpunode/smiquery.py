"""One GPU model and one `nvidia-smi --query-gpu` CSV parser, for fact gathering and the monitor.

`SmiGpu` is what nvidia-smi (or NVML, for the monitor's local path) says about one GPU; the
facts keep it in `HostFacts.smi`, the monitor's `GpuSample` is one with a host and a time.
Fields are mapped by the names that were asked for (or that a CSV header prints), so one
parser reads fact gathering's query, the monitor's stream and the captures used as fixtures.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

_MISSING = frozenset(
    {
        "",
        "n/a",
        "not supported",
        "unknown error",
        "gpu is lost",
        "requested functionality has been deprecated",
    }
)


def is_missing(text: str) -> bool:
    """True for what nvidia-smi prints where a value does not exist on this GPU or driver:
    "[N/A]", "N/A", "[Not Supported]", "" and the like."""
    return text.strip().strip("[]").strip().lower() in _MISSING


class SmiGpu(BaseModel):
    """One GPU as nvidia-smi's query fields (or NVML) report it; None where it did not say."""

    model_config = ConfigDict(extra="forbid")

    index: int
    name: str
    uuid: str = ""
    bus_id: str = ""
    driver_version: str = ""
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None  # as nvidia-smi and DCGM count it: reserved excluded
    memory_free_mib: int | None = None
    memory_reserved_mib: int | None = None  # the driver's own share, neither used nor free
    utilization_pct: float | None = None
    memory_utilization_pct: float | None = None  # memory controller busy (DCGM's MEM_COPY_UTIL)
    encoder_utilization_pct: float | None = None
    decoder_utilization_pct: float | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    energy_mj: float | None = None  # since the driver loaded (NVML); the monitor sums power
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    persistence_mode: bool | None = None
    clocks_event_reasons: int | None = None  # the active reasons' bit mask
    ecc_sbe_volatile: int | None = None
    ecc_dbe_volatile: int | None = None
    ecc_sbe_aggregate: int | None = None
    ecc_dbe_aggregate: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_failure: bool | None = None
    pcie_replay_count: int | None = None  # NVML only
    pcie_tx_bytes_per_second: float | None = None  # NVML only
    pcie_rx_bytes_per_second: float | None = None  # NVML only
    gr_engine_active: float | None = None  # ratios 0..1, NVML's GPM (Hopper and newer) only
    tensor_active: float | None = None
    dram_active: float | None = None


# query field (or the name nvidia-smi prints in its CSV header) -> SmiGpu attribute
FIELD_ATTR: dict[str, str] = {
    "index": "index",
    "name": "name",
    "uuid": "uuid",
    "pci.bus_id": "bus_id",
    "driver_version": "driver_version",
    "memory.total": "memory_total_mib",
    "memory.used": "memory_used_mib",
    "memory.free": "memory_free_mib",
    "memory.reserved": "memory_reserved_mib",
    "utilization.gpu": "utilization_pct",
    "utilization.memory": "memory_utilization_pct",
    "utilization.encoder": "encoder_utilization_pct",
    "utilization.decoder": "decoder_utilization_pct",
    "temperature.gpu": "temperature_c",
    "temperature.memory": "memory_temperature_c",
    "power.draw": "power_draw_w",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "clocks.current.memory": "mem_clock_mhz",
    "persistence_mode": "persistence_mode",
    "clocks_throttle_reasons.active": "clocks_event_reasons",
    "clocks_event_reasons.active": "clocks_event_reasons",
    "ecc.errors.corrected.volatile.total": "ecc_sbe_volatile",
    "ecc.errors.uncorrected.volatile.total": "ecc_dbe_volatile",
    "ecc.errors.corrected.aggregate.total": "ecc_sbe_aggregate",
    "ecc.errors.uncorrected.aggregate.total": "ecc_dbe_aggregate",
    "remapped_rows.correctable": "remapped_rows_correctable",
    "remapped_rows.uncorrectable": "remapped_rows_uncorrectable",
    "remapped_rows.failure": "remapped_rows_failure",
}
_TEXT = {"name", "uuid", "bus_id", "driver_version"}
_BOOL = {"persistence_mode", "remapped_rows_failure"}
_HEX = {"clocks_event_reasons"}
_INT = {
    "index", "memory_total_mib", "memory_used_mib", "memory_free_mib", "memory_reserved_mib",
    "ecc_sbe_volatile", "ecc_dbe_volatile", "ecc_sbe_aggregate", "ecc_dbe_aggregate",
    "remapped_rows_correctable", "remapped_rows_uncorrectable",
}  # fmt: skip
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_HEADER = re.compile(r"[a-z_.]+(\s*\[.*\])?")

G = TypeVar("G", bound=SmiGpu)


class SmiParseError(ValueError):
    pass


def convert(attr: str, raw: str) -> Any:
    """One raw nvidia-smi value as the type of SmiGpu's `attr` (None when missing)."""
    if is_missing(raw):
        return None
    v = raw.strip()
    if attr in _TEXT:
        return v
    if attr in _BOOL:
        return v.lower() in ("enabled", "on", "1", "yes")
    if attr in _HEX:
        try:
            return int(v, 16)
        except ValueError:
            raise SmiParseError(f"{attr}: not a bit mask: {v!r}") from None
    m = _NUMBER.search(v)
    if m is None:
        raise SmiParseError(f"{attr}: not a number: {v!r}")
    num = float(m.group())
    if attr in _INT:
        if attr != "index" and "GiB" in v:
            num *= 1024
        return round(num)
    return num


def gpu_from(values: dict[str, Any], model: type[G], **extra: Any) -> G:
    """A GPU from converted values; index and name are required."""
    clean = {k: v for k, v in values.items() if v is not None}
    if "index" not in clean or "name" not in clean:
        raise SmiParseError(f"a GPU row needs index and name: {values}")
    return model(**clean, **extra)


def parse_row(line: str, names: Sequence[str], model: type[G], **extra: Any) -> G:
    """One CSV row of the fields `names` (a name holding commas is joined back)."""
    cols = [c.strip() for c in line.split(",")]
    if len(cols) > len(names) and "name" in names:
        i = names.index("name")
        extra_cols = len(cols) - len(names)
        cols[i : i + extra_cols + 1] = [", ".join(cols[i : i + extra_cols + 1])]
    if len(cols) != len(names):
        raise SmiParseError(f"{len(cols)} columns, expected {len(names)}: {line!r}")
    values: dict[str, Any] = {}
    for name, raw in zip(names, cols, strict=True):
        attr = FIELD_ATTR.get(name)
        if attr is not None:
            values[attr] = convert(attr, raw)
    return gpu_from(values, model, **extra)


def header_names(line: str) -> list[str] | None:
    """The query field names of a CSV header line ("memory.total [MiB]" -> memory.total),
    None when the line is a data row."""
    first = line.split(",")[0].strip()
    if not _HEADER.fullmatch(first):
        return None
    return [re.sub(r"\s*\[.*\]$", "", c.strip()) for c in line.split(",")]


def parse_csv(text: str, fields: Sequence[str] | None = None) -> list[SmiGpu]:
    """`--query-gpu=...` output, with or without a header and units. `fields` is the query
    list (needed when there is no header)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    names = list(fields) if fields is not None else None
    header = header_names(lines[0]) if lines else None
    if header is not None:
        names, lines = header, lines[1:]
    if names is None:
        raise SmiParseError("CSV without a header: pass the query fields")
    return [parse_row(ln, names, SmiGpu) for ln in lines]
