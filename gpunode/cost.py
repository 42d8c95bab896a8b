"""Cost per unit of measured work, for each GPU type of the fleet.

The price is the inventory's (`gpus.hourly_cost`); the work is what the smoke suite
measured on the hosts themselves: the bf16 matmul TFLOP/s of one GPU (`torch-matmul`),
read from the run records, newest first. Nothing here comes from a table of published
figures, so a type never measured says so instead of being guessed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpunode.inventory.model import Host

METRIC = "bf16_tflops"


@dataclass(frozen=True)
class Measured:
    tflops: float
    """bf16 matmul TFLOP/s of one GPU, the best environment of that run."""
    run: str
    when: float
    gpu: str


def latest(records: Iterable[dict[str, Any]]) -> dict[str, Measured]:
    """Each host's newest bf16 measurement that passed (or only warned) in `records`."""
    found: dict[str, Measured] = {}
    for rec in sorted(records, key=lambda r: float(r.get("started") or 0), reverse=True):
        for host, data in (rec.get("hosts") or {}).items():
            if host in found:
                continue
            values = [
                (float(r["value"]), str((r.get("details") or {}).get("gpu") or ""))
                for r in ((data or {}).get("smoke") or {}).get("results") or []
                if (r.get("details") or {}).get("metric") == METRIC
                and r.get("status") in ("pass", "warn")
                and isinstance(r.get("value"), int | float)
                and r["value"] > 0
            ]
            if values:
                tflops, gpu = max(values)
                found[host] = Measured(tflops, str(rec.get("id", "")), float(rec["started"]), gpu)
    return found


@dataclass
class GpuType:
    """Hosts with the same GPU model at the same price per GPU-hour."""

    model: str
    gpu_hour: float
    """The price of one GPU for one hour (a host's price divided by its GPUs)."""
    currency: str
    hosts: list[str] = field(default_factory=list)
    counts: list[int | None] = field(default_factory=list)
    measured: list[Measured] = field(default_factory=list)

    @property
    def tflops(self) -> float | None:
        """The median over the type's hosts of each host's newest measurement."""
        return statistics.median(m.tflops for m in self.measured) if self.measured else None

    @property
    def gpus(self) -> int | None:
        """GPUs of the type in the fleet; None when a host has no gpus.count."""
        return None if None in self.counts else sum(c or 0 for c in self.counts)

    @property
    def tflops_per_cost(self) -> float | None:
        """Measured TFLOP/s bought by one unit of currency per hour."""
        return None if self.tflops is None else self.tflops / self.gpu_hour

    @property
    def cost_per_pflops_hour(self) -> float | None:
        """What one PFLOP/s sustained for an hour costs on this type."""
        return None if self.tflops is None else self.gpu_hour * 1000 / self.tflops

    @property
    def last_measured(self) -> float | None:
        return max((m.when for m in self.measured), default=None)


@dataclass(frozen=True)
class Unpriced:
    host: str
    model: str


def gpu_types(
    hosts: Sequence[Host], measured: dict[str, Measured]
) -> tuple[list[GpuType], list[Unpriced]]:
    """The fleet grouped by (model, price per GPU-hour), and the hosts without a price."""
    types: dict[tuple[str, float, str], GpuType] = {}
    unpriced = []
    for h in hosts:
        m = measured.get(h.name)
        model = h.gpus.model or (m.gpu if m else "") or "unknown model"
        price = h.gpus.hourly_cost
        if price is None:
            unpriced.append(Unpriced(h.name, model))
            continue
        # a host price needs gpus.count (the inventory refuses it without one)
        gpu_hour = price.amount / (h.gpus.count or 1) if price.per == "host" else price.amount
        key = (model, round(gpu_hour, 6), price.currency)
        t = types.setdefault(key, GpuType(model, gpu_hour, price.currency))
        t.hosts.append(h.name)
        t.counts.append(h.gpus.count)
        if m is not None:
            t.measured.append(m)
    return list(types.values()), unpriced


@dataclass(frozen=True)
class Option:
    """One GPU type's answer to "this much work, by then, for at most this much"."""

    type: GpuType
    gpu_hours: float | None
    gpus_needed: int | None
    cost: float | None
    fits: bool
    why: str


def plan_work(
    types: Sequence[GpuType], work_pflop: float, hours: float, budget: float | None
) -> list[Option]:
    """Each type's GPU-hours, GPUs and cost for `work_pflop` PFLOP within `hours`; the
    types that fit first, cheapest first; then the others, with why not."""
    out = []
    for t in types:
        if t.tflops is None:
            why = "never measured: run `gpunode smoke INVENTORY --only torch-matmul` on its hosts"
            out.append(Option(t, None, None, None, False, why))
            continue
        gpu_hours = work_pflop * 1e15 / (t.tflops * 1e12) / 3600
        needed = max(1, math.ceil(gpu_hours / hours - 1e-9))
        cost = gpu_hours * t.gpu_hour
        why = ""
        if t.gpus is None:
            why = "gpus.count is not set, so the GPUs available are not known"
        elif needed > t.gpus:
            why = f"needs {needed} GPUs to finish in {hours:g} h; the fleet has {t.gpus}"
        elif budget is not None and cost > budget:
            why = f"costs {cost:,.2f} {t.currency}, over the budget of {budget:,.2f}"
        out.append(Option(t, gpu_hours, needed, cost, not why, why))
    return sorted(out, key=lambda o: (not o.fits, o.cost is None, o.cost or 0.0, o.type.model))


def currencies(types: Iterable[GpuType]) -> set[str]:
    return {t.currency for t in types}
