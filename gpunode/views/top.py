"""`gpunode top --once`: one sample of every host, as `top-sample` JSON or as text."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import ConfigDict

from gpunode.monitor.board import HostView
from gpunode.monitor.model import GpuSample
from gpunode.safetext import printable

# The names schema 1 first gave a GPU's fields, and the sample's field each now comes from:
# within a schema a field is never removed (docs/json.md), so both are written.
FIRST_NAMES = {
    "util": "utilization_pct",
    "mem_used": "memory_used_mib",
    "mem_total": "memory_total_mib",
    "mem_free": "memory_free_mib",
    "temp": "temperature_c",
    "power_draw": "power_draw_w",
    "power_limit": "power_limit_w",
    "sm_clock": "sm_clock_mhz",
    "mem_clock": "mem_clock_mhz",
    "driver": "driver_version",
}


class TopGpu(GpuSample):
    """One GPU of a `top-sample` line: the monitor's sample under its own names and under
    the first ones (util, mem_used, temp...; `mem_used` as nvidia-smi counts it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    util: float | None = None
    mem_used: int | None = None
    mem_total: int | None = None
    mem_free: int | None = None
    temp: float | None = None
    power_draw: float | None = None
    power_limit: float | None = None
    sm_clock: float | None = None
    mem_clock: float | None = None
    driver: str = ""


def _gpu_json(sample: GpuSample) -> dict[str, Any]:
    out = sample.model_dump()
    out.update({first: out[now] for first, now in FIRST_NAMES.items()})
    return out


def sample_json(view: HostView) -> dict[str, Any]:
    """A host's `top-sample` payload: its link, and the last sample of each GPU."""
    return {
        "host": view.name,
        "link": view.link,
        "detail": view.detail,
        "source": view.source,
        "ts": view.last_ts,
        "gpus": [_gpu_json(view.gpus[i]) for i in sorted(view.gpus)],
        "processes": [dataclasses.asdict(p) for p in view.processes],
    }


def sample_text(view: HostView) -> str:
    """A host's line, then one line per GPU."""
    head = f"{view.name}: {view.link}" + (f" ({view.detail})" if view.detail else "")
    lines = [head]
    for i in sorted(view.gpus):
        g = view.gpus[i]
        known = g.memory_total_mib is not None
        mem = f"{g.memory_used_mib}/{g.memory_total_mib} MiB" if known else "? MiB"
        lines.append(
            f"  gpu {g.index} {g.name}: util {_num(g.utilization_pct, '%')} mem {mem} "
            f"temp {_num(g.temperature_c, 'C')} power {_num(g.power_draw_w, 'W')}"
        )
    return printable("\n".join(lines), lines=True)


def _num(value: float | None, unit: str) -> str:
    return "?" if value is None else f"{value:g}{unit}"
