"""`gpunode doctor`'s views: one block per host, findings worst first; or JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from gpunode.doctor.model import health
from gpunode.safetext import printable

if TYPE_CHECKING:
    from gpunode.doctor.gather import Diagnosis
    from gpunode.hostpool import Outcome


def doctor_json(outcomes: dict[str, Outcome[Diagnosis]], exit_code: int) -> dict[str, Any]:
    """{"hosts": {name: {status, health, findings, error?}}, "exit_code": N}."""
    hosts: dict[str, Any] = {}
    for name, o in outcomes.items():
        findings = o.value.findings if o.value is not None else []
        entry: dict[str, Any] = {
            "status": o.state,
            "health": health(findings) if o.value is not None else None,
            "findings": [asdict(f) for f in findings],
        }
        if o.error:
            entry["error"] = o.error
        hosts[name] = entry
    return {"hosts": hosts, "exit_code": exit_code}


def _count(findings: list[Any], severity: str) -> str:
    n = sum(1 for f in findings if f.severity == severity)
    return f"{n} {severity}{'s' if n != 1 else ''}" if n else ""


def doctor_text(outcomes: dict[str, Outcome[Diagnosis]]) -> str:
    blocks = []
    for name, o in outcomes.items():
        if o.value is None:
            word = "HOST KEY CHANGED" if o.hostkey_changed else o.status.upper()
            blocks.append(f"{name}: {word}: {o.error}\n")
            continue
        fs = o.value.findings
        counts = ", ".join(c for s in ("error", "warning", "info") if (c := _count(fs, s)))
        lines = [f"{name}: {health(fs)}" + (f" ({counts})" if counts else "")]
        for f in fs:
            lines += [
                f"  {f.severity:<8} {f.rule}: {f.title}",
                f"           evidence: {f.evidence}",
                f"           fix:      {f.fix}",
            ]
        blocks.append("\n".join(lines) + "\n")
    return printable("\n".join(blocks), lines=True)


def doctor_summary(outcomes: dict[str, Outcome[Diagnosis]]) -> str:
    words = [health(o.value.findings) for o in outcomes.values() if o.value is not None]
    unread = len(outcomes) - len(words)
    n = len(outcomes)
    return (
        f"{words.count('healthy')} of {n} host{'s' if n != 1 else ''} healthy"
        + (f", {words.count('error')} with errors" if "error" in words else "")
        + (f", {words.count('warning')} with warnings" if "warning" in words else "")
        + (f", {unread} not read" if unread else "")
    )
