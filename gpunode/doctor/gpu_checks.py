"""The GPUs' checks: how many answer, the kernel's Xid lines, ECC, retired pages and
remapped rows, the PCIe link, clock slowdowns, temperature; read from `nvidia-smi -q`
(`smiq.py`) and the kernel log."""

from __future__ import annotations

from gpunode.doctor.inputs import Inputs
from gpunode.doctor.model import Hit
from gpunode.doctor.smiq import SmiGpuQuery
from gpunode.doctor.xid import XID_LINE, xid_of

NEAR_SLOWDOWN_C = 5.0
"""Degrees from the slowdown threshold at which a GPU is reported as near it."""


def fewer_gpus(i: Inputs) -> list[Hit]:
    want = i.host.gpus.count
    if want is None or not i.facts.module.loaded:
        return []
    seen = len(i.facts.smi.gpus) or len(i.probe.smi_q)
    if seen >= want:
        return []
    return [Hit(f"nvidia-smi lists {seen} GPU{'s' if seen != 1 else ''}; the inventory's "
                f"gpus.count is {want}")]  # fmt: skip


def fallen_off(i: Inputs) -> list[Hit]:
    return [
        Hit(line)
        for line in i.probe.kernel_log
        if "fallen off the bus" in line and not XID_LINE.search(line)
    ]


def xid(i: Inputs) -> list[Hit]:
    hits = []
    for line in i.probe.kernel_log:
        m = XID_LINE.search(line)
        if m:
            x = xid_of(int(m.group(2)))
            title = f"Xid {m.group(2)} on {m.group(1)}: {x.meaning}"
            hits.append(Hit(line, fix=x.fix, severity=x.severity, title=title))
    return hits


def _gpu(q: SmiGpuQuery, line: str) -> str:
    return f"{line}  (GPU {q.bus_id})"


def ecc_uncorrectable(i: Inputs) -> list[Hit]:
    hits = []
    for q in i.probe.smi_q:
        for scope, severity in (("Volatile", "error"), ("Aggregate", "warning")):
            bad = [
                line
                for key, (value, line) in q.under(f"ECC Errors/{scope}").items()
                if ("Uncorrectable" in key or key.startswith("Double Bit"))
                and value.isdigit()
                and int(value) > 0
            ]
            if bad:
                hits.append(Hit(_gpu(q, bad[0]), severity=severity))  # type: ignore[arg-type]
                break
    return hits


def retired_or_remap_pending(i: Inputs) -> list[Hit]:
    keys = ("Retired Pages/Pending Page Blacklist", "Retired Pages/Pending Page Retirement",
            "Remapped Rows/Pending")  # fmt: skip
    return [Hit(_gpu(q, q.line(k))) for q in i.probe.smi_q for k in keys if q.get(k) == "Yes"]


def remap_failed(i: Inputs) -> list[Hit]:
    k = "Remapped Rows/Remapping Failure Occurred"
    return [Hit(_gpu(q, q.line(k))) for q in i.probe.smi_q if q.get(k) == "Yes"]


def pcie_degraded(i: Inputs) -> list[Hit]:
    hits = []
    for q in i.probe.smi_q:
        base = "PCI/GPU Link Info"
        for what, sub in (("generation", "PCIe Generation"), ("width", "Link Width")):
            cur, top = q.number(f"{base}/{sub}/Current"), q.number(f"{base}/{sub}/Max")
            if cur is None or top is None or cur >= top:
                continue
            # an idle GPU may lower its link generation to save power; under load it should not
            idle = what == "generation" and q.get("Performance State") not in ("P0", None)
            hits.append(
                Hit(
                    _gpu(q, f"{sub}: Current {q.get(f'{base}/{sub}/Current')}, "
                            f"Max {q.get(f'{base}/{sub}/Max')}"),
                    severity="info" if idle else None,
                    title=f"PCIe link {what} below its maximum",
                )
            )  # fmt: skip
    return hits


_SLOWDOWN = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")


def clocks_throttled(i: Inputs) -> list[Hit]:
    hits = []
    for q in i.probe.smi_q:
        for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
            reasons = q.under(section)
            for key in (*_SLOWDOWN, "SW Power Cap"):
                value, line = reasons.get(key, ("", ""))
                if value == "Active":
                    power_cap = key == "SW Power Cap"
                    hits.append(Hit(_gpu(q, line), severity="info" if power_cap else None))
    return hits


def _near(q: SmiGpuQuery, cur_key: str, limit_key: str, margins: bool) -> Hit | None:
    """A hit when the temperature is within NEAR_SLOWDOWN_C of the slowdown threshold:
    newer drivers print margins below T.Limit, older ones degrees."""
    cur, limit = q.number(f"Temperature/{cur_key}"), q.number(f"Temperature/{limit_key}")
    if cur is None or limit is None:
        return None
    gap = cur - limit if margins else limit - cur
    if gap > NEAR_SLOWDOWN_C:
        return None
    return Hit(
        _gpu(q, q.line(f"Temperature/{cur_key}") + "; " + q.line(f"Temperature/{limit_key}"))
    )


def temperature_near_slowdown(i: Inputs) -> list[Hit]:
    hits = []
    for q in i.probe.smi_q:
        if q.get("Temperature/GPU T.Limit Temp") is not None:
            hit = _near(q, "GPU T.Limit Temp", "GPU Slowdown T.Limit Temp", margins=True)
        else:
            hit = _near(q, "GPU Current Temp", "GPU Slowdown Temp", margins=False)
        if hit is not None:
            hits.append(hit)
    return hits
