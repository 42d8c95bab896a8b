"""GPU types by measured work per cost: a table, and the answer to a work/deadline/budget."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gpunode.cost import GpuType, Option, Unpriced
from gpunode.safetext import printable


def _num(value: float | None, fmt: str = ",.2f") -> str:
    return "-" if value is None else format(value, fmt)


def type_json(t: GpuType) -> dict[str, Any]:
    return {
        "model": t.model,
        "hosts": list(t.hosts),
        "gpus": t.gpus,
        "currency": t.currency,
        "gpu_hour": t.gpu_hour,
        "bf16_tflops": t.tflops,
        "measured_hosts": len(t.measured),
        "last_measured": t.last_measured,
        "runs": sorted({m.run for m in t.measured}),
        "tflops_per_cost": t.tflops_per_cost,
        "cost_per_pflops_hour": t.cost_per_pflops_hour,
    }


def option_json(o: Option) -> dict[str, Any]:
    return {
        "model": o.type.model,
        "currency": o.type.currency,
        "gpu_hours": o.gpu_hours,
        "gpus_needed": o.gpus_needed,
        "gpus": o.type.gpus,
        "cost": o.cost,
        "fits": o.fits,
        "why": o.why,
    }


def payload(
    types: Sequence[GpuType],
    unpriced: Sequence[Unpriced],
    options: Sequence[Option] | None = None,
    work: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "types": [type_json(t) for t in types],
        "unpriced": [{"host": u.host, "model": u.model} for u in unpriced],
        "work": None
        if work is None
        else {**work, "options": [option_json(o) for o in options or ()]},
    }


def _money(value: float | None, currency: str) -> str:
    return "-" if value is None else f"{value:,.2f} {currency}"


def table(types: Sequence[GpuType], unpriced: Sequence[Unpriced]) -> str:
    """One line per GPU type: price, measured bf16 TFLOP/s per GPU, and what they buy."""
    head = (
        "GPU TYPE", "HOSTS", "GPUS", "PRICE/GPU-H", "BF16 TFLOP/S", "TFLOP/S PER 1/H",
        "COST PER PFLOP/S-H", "MEASURED",
    )  # fmt: skip
    rows = []
    for t in sorted(types, key=_cheapest_work):
        rows.append(
            (
                t.model,
                str(len(t.hosts)),
                "-" if t.gpus is None else str(t.gpus),
                _money(t.gpu_hour, t.currency),
                _num(t.tflops, ",.1f"),
                _num(t.tflops_per_cost, ",.1f"),
                _money(t.cost_per_pflops_hour, t.currency),
                _measured(t),
            )
        )
    lines = _columns(head, rows) if rows else ["no host has gpus.hourly_cost"]
    never = [t.model for t in types if t.tflops is None]
    if never:
        lines.append(
            f"never measured: {', '.join(never)}: run `gpunode smoke INVENTORY --only "
            "torch-matmul` on their hosts (a torch env is needed)"
        )
    if unpriced:
        names = ", ".join(u.host for u in unpriced[:5]) + (" ..." if len(unpriced) > 5 else "")
        lines.append(f"no gpus.hourly_cost: {len(unpriced)} hosts ({names})")
    return printable("\n".join(lines), lines=True)


def _measured(t: GpuType) -> str:
    when = t.last_measured
    if when is None:
        return "never"
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(when))
    return f"{stamp} ({len(t.measured)} of {len(t.hosts)} hosts)"


def _cheapest_work(t: GpuType) -> tuple[bool, float]:
    return (t.cost_per_pflops_hour is None, t.cost_per_pflops_hour or 0.0)


def plan_table(
    options: Sequence[Option], work_pflop: float, hours: float, budget: float | None
) -> str:
    """The types ranked for one job: the cheapest that fits first."""
    deadline = "" if hours == float("inf") else f" within {hours:g} h"
    limit = "" if budget is None else f", budget {budget:,.2f}"
    lines = [f"{work_pflop:,.6g} PFLOP of bf16 work{deadline}{limit}:"]
    head = ("RANK", "GPU TYPE", "GPU-HOURS", "GPUS NEEDED", "GPUS", "COST", "FITS")
    rows = [
        (
            str(i) if o.fits else "-",
            o.type.model,
            _num(o.gpu_hours, ",.1f"),
            "-" if o.gpus_needed is None else str(o.gpus_needed),
            "-" if o.type.gpus is None else str(o.type.gpus),
            _money(o.cost, o.type.currency),
            "yes" if o.fits else f"no: {o.why}",
        )
        for i, o in enumerate(options, 1)
    ]
    return printable("\n".join(lines + _columns(head, rows)), lines=True)


def _columns(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    rows = [tuple(printable(c) for c in r) for r in rows]  # escaped before widths are taken
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)), r[-1]]).rstrip()
        for r in [head, *rows]
    ]
