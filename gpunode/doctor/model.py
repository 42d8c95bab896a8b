"""A finding: what is wrong on a host, how bad, the line that shows it, what to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
"""Worst first: a host's findings are shown in this order."""


@dataclass(frozen=True)
class Finding:
    """One rule's verdict on one host."""

    rule: str
    """The rule's id (`gpu.xid`): docs/troubleshooting.md's findings table names each."""
    severity: Severity
    title: str
    evidence: str
    """The exact line that shows it, as the host printed it."""
    fix: str
    """An inventory change, a gpunode command, or a manual step."""


def ordered(findings: list[Finding]) -> list[Finding]:
    """Worst first, then by rule, as the views show them."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.rule))


@dataclass(frozen=True)
class Hit:
    """What a rule's check found: the evidence, and what differs from the rule's defaults."""

    evidence: str
    fix: str | None = None
    severity: Severity | None = None
    title: str | None = None


def health(findings: list[Finding]) -> Literal["error", "warning", "healthy"]:
    """A host's word: its worst finding's severity, or healthy (info findings only)."""
    severities = {f.severity for f in findings}
    return "error" if "error" in severities else "warning" if "warning" in severities else "healthy"
