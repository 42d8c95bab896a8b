"""`gpunode top --once`: one sample of every host, as `top-sample` JSON or as text."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpunode.monitor.board import HostView
from gpunode.safetext import printable


def sample_json(view: HostView) -> dict[str, Any]:
    """A host's `top-sample` payload: its link, and the last sample of each GPU."""
    return {
        "host": view.name,
        "link": view.link,
        "detail": view.detail,
        "source": view.source,
        "ts": view.last_ts,
        "gpus": [view.gpus[i].model_dump() for i in sorted(view.gpus)],
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
