"""Parse `nvidia-smi --query-* --format=csv,noheader,nounits` output.

Fields are mapped by the names that were asked for, so the same parser reads
the monitor's own query and the wider captures used as test fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from gpunode.monitor.model import GpuProcess, GpuSample
from gpunode.smivalues import is_missing

QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "driver_version",
    "memory.free",
    "clocks.mem",
    "pci.bus_id",
)
APPS_FIELDS: tuple[str, ...] = ("gpu_uuid", "pid", "used_memory", "process_name")


def query_gpu_command(interval_ms: int | None = 1000) -> list[str]:
    argv = [
        "nvidia-smi",
        "--query-gpu=" + ",".join(QUERY_FIELDS),
        "--format=csv,noheader,nounits",
    ]
    if interval_ms is not None:
        argv += ["-lms", str(int(interval_ms))]
    return argv


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


def _fields(line: str, names: Sequence[str]) -> dict[str, str] | None:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != len(names):
        return None
    return dict(zip(names, parts, strict=True))


def parse_gpu_line(
    line: str, host: str, ts: float, fields: Sequence[str] = QUERY_FIELDS
) -> GpuSample | None:
    """One CSV line -> a sample; None for anything else (headers, errors, blank lines)."""
    f = _fields(line, fields)
    if f is None:
        return None
    index = as_int(f.get("index", ""))
    if index is None:
        return None
    return GpuSample(
        host=host,
        index=index,
        name=value(f.get("name", "")) or "",
        uuid=value(f.get("uuid", "")) or "",
        util=as_float(f.get("utilization.gpu", "")),
        mem_used=as_int(f.get("memory.used", "")),
        mem_total=as_int(f.get("memory.total", "")),
        temp=as_float(f.get("temperature.gpu", "")),
        power_draw=as_float(f.get("power.draw", "")),
        power_limit=as_float(f.get("power.limit", "")),
        sm_clock=as_int(f.get("clocks.sm", "")),
        ts=ts,
        driver=value(f.get("driver_version", "")) or "",
        mem_free=as_int(f.get("memory.free", "")),
        mem_clock=as_int(f.get("clocks.mem", "")),
        bus_id=value(f.get("pci.bus_id", "")) or "",
    )


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


class LineSplitter:
    """Turn output chunks (split anywhere) into whole lines."""

    def __init__(self) -> None:
        self._rest = ""

    def feed(self, chunk: str) -> Iterator[str]:
        data = self._rest + chunk
        *lines, self._rest = data.split("\n")
        for line in lines:
            yield line.rstrip("\r")
