"""The monitor's nvidia-smi commands, and their output parsed: GPU rows through
gpunode.smiquery (the facts' parser), compute apps and `ps` users here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from pydantic import ValidationError

from gpunode.monitor.model import GpuProcess, GpuSample
from gpunode.smiquery import SmiParseError, is_missing, parse_row

BASE_FIELDS: tuple[str, ...] = (
    "index", "name", "uuid", "utilization.gpu", "memory.used", "memory.total",
    "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "driver_version",
    "memory.free", "clocks.mem", "pci.bus_id",
)  # fmt: skip
"""What every driver nvidia-smi answers (the monitor falls back to these alone when a
driver refuses a field of the wider query)."""

QUERY_FIELDS: tuple[str, ...] = (
    *BASE_FIELDS,
    "memory.reserved", "utilization.memory", "utilization.encoder", "utilization.decoder",
    "temperature.memory", "clocks_throttle_reasons.active",
    "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total",
    "remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.failure",
)  # fmt: skip
"""dcgm-exporter's default counters as far as `--query-gpu` has them (docs/monitoring.md
lists the rest: NVML's, on the local path only)."""

APPS_FIELDS: tuple[str, ...] = ("gpu_uuid", "pid", "used_memory", "process_name")


def query_gpu_command(
    interval_ms: int | None = 1000, fields: Sequence[str] = QUERY_FIELDS
) -> list[str]:
    argv = [
        "nvidia-smi",
        "--query-gpu=" + ",".join(fields),
        "--format=csv,noheader,nounits",
    ]
    if interval_ms is not None:
        argv += ["-lms", str(int(interval_ms))]
    return argv


DMON_GPM = (1, 5, 10)  # graphics, tensor and DRAM activity (nvidia-smi dmon -h's numbers)
# dmon's column -> (SmiGpu attribute, scale): PCIe MB/s to bytes/s, GPM percents to ratios
DMON_COLUMNS: dict[str, tuple[str, float]] = {
    "pci": ("pcie_replay_count", 1.0),
    "rxpci": ("pcie_rx_bytes_per_second", 1e6),
    "txpci": ("pcie_tx_bytes_per_second", 1e6),
    "gract": ("gr_engine_active", 0.01),
    "mmaact": ("tensor_active", 0.01),
    "dram": ("dram_active", 0.01),
}


def dmon_command(interval_s: float) -> list[str]:
    """`nvidia-smi dmon`: what `--query-gpu` lacks and DCGM has (PCIe replays and
    throughput, GPM's profiling ratios on Hopper and newer), one row per GPU a tick."""
    gpm = ",".join(map(str, DMON_GPM))
    return [
        "nvidia-smi",
        "dmon",
        "-s",
        "te",
        "--gpm-metrics",
        gpm,
        "-d",
        str(max(1, round(interval_s))),
    ]


class DmonParser:
    """`nvidia-smi dmon` output, a line at a time: its `# gpu ...` header names the columns,
    each row is a GPU's (index, {attribute: value}); "-" (a GPM metric's first tick, or one
    the GPU lacks) is left out."""

    def __init__(self) -> None:
        self.columns: list[str] = []

    def feed(self, line: str) -> tuple[int, dict[str, float]] | None:
        words = line.split()
        if not words:
            return None
        if words[0] == "#":
            if len(words) > 1 and words[1] == "gpu":
                self.columns = words[1:]
            return None
        if len(words) != len(self.columns) or not words[0].isdigit():
            return None
        values: dict[str, float] = {}
        for column, word in zip(self.columns[1:], words[1:], strict=True):
            attr = DMON_COLUMNS.get(column)
            if attr is None:
                continue
            try:
                values[attr[0]] = float(word) * attr[1]
            except ValueError:
                continue
        if "pcie_replay_count" in values:
            values["pcie_replay_count"] = round(values["pcie_replay_count"])
        return int(words[0]), values


def query_apps_command() -> list[str]:
    return [
        "nvidia-smi",
        "--query-compute-apps=" + ",".join(APPS_FIELDS),
        "--format=csv,noheader,nounits",
    ]


def value(text: str) -> str | None:
    text = text.strip()
    return None if is_missing(text) else text


def as_float(text: str) -> float | None:
    v = value(text)
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        return None


def as_int(text: str) -> int | None:
    f = as_float(text)
    return None if f is None else round(f)


def parse_gpu_line(
    line: str, host: str, ts: float, fields: Sequence[str] = QUERY_FIELDS
) -> GpuSample | None:
    """One CSV line -> a sample; None for anything else (headers, errors, blank lines)."""
    try:
        return parse_row(line, fields, GpuSample, host=host, ts=ts)
    except (SmiParseError, ValidationError):
        return None


def parse_apps(
    text: str, host: str, uuid_to_index: Mapping[str, int], users: Mapping[int, str]
) -> list[GpuProcess]:
    out: list[GpuProcess] = []
    for line in text.splitlines():
        # The process name may itself hold commas: split only the first three.
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) != 4:
            continue
        uuid, pid_s, mem_s, name = parts
        pid = as_int(pid_s)
        if pid is None:
            continue
        out.append(
            GpuProcess(
                host=host,
                gpu=uuid_to_index.get(uuid, -1),
                pid=pid,
                user=users.get(pid, ""),
                used_mem=as_int(mem_s),
                command=value(name) or "",
            )
        )
    return out


def parse_ps_users(text: str) -> dict[int, str]:
    """`ps -o pid=,user= -p ...` -> {pid: user}."""
    users: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            users[int(parts[0])] = parts[1]
    return users


LINE_MAX = 64 << 10
"""Characters of an unfinished line kept: no query row comes near; a host that prints
without newlines (a spewing host) has the start of that line dropped, not kept growing."""


class LineSplitter:
    """Turn output chunks (split anywhere) into whole lines."""

    def __init__(self) -> None:
        self._rest = ""

    def feed(self, chunk: str) -> Iterator[str]:
        data = self._rest + chunk
        *lines, self._rest = data.split("\n")
        self._rest = self._rest[-LINE_MAX:]
        for line in lines:
            yield line.rstrip("\r")
