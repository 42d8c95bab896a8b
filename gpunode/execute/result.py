"""What happened on each host: the executor's answer, the run record's body."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from gpunode.events import HostRecap
from gpunode.execute.output import StepOutput
from gpunode.exitcodes import ExitCode, exit_code_for

HostOutcome = Literal[
    "ok",
    "changed",
    "failed",
    "unreachable",
    "hostkey-changed",
    "skipped",
    "reboot-pending",
    "interrupted",
]


@dataclass
class ChangeResult:
    title: str
    role: str
    op: str
    reason: str
    status: Literal["changed", "failed", "skipped"]
    seconds: float
    commands: list[str] = field(default_factory=list)
    message: str = ""
    diff: str = ""
    output: StepOutput | None = None
    """A failed change's failing step: its command and full output."""


@dataclass
class HostResult:
    host: str
    status: HostOutcome = "ok"
    message: str = ""
    seconds: float = 0.0
    round_trips: int = 0
    """Commands sent to the host (facts reads, change steps, reboot, smoke)."""
    plans: list[dict[str, Any]] = field(default_factory=list)
    """Each plan made for the host: the first, and the one after a reboot."""
    changes: list[ChangeResult] = field(default_factory=list)
    rebooted: bool = False
    reboot_seconds: float = 0.0
    boot_id: str = ""
    smoke: dict[str, Any] | None = None
    facts_seconds: list[float] = field(default_factory=list)
    refused: bool = False
    """Failed because its stack was refused before any change was made (exit 4)."""
    locked: bool = False
    """Failed because another run holds the host's lock: not touched (exit 11)."""

    @property
    def final(self) -> str:
        """The status the run's exit status ranks: "refused" for a refused stack, "locked"
        for a host another run holds."""
        if self.status == "failed" and (self.refused or self.locked):
            return "locked" if self.locked else "refused"
        return self.status

    @property
    def changed(self) -> int:
        return sum(1 for c in self.changes if c.status == "changed")

    @property
    def failed(self) -> int:
        return sum(1 for c in self.changes if c.status == "failed")

    @property
    def ok(self) -> int:
        return sum(1 for c in self.changes if c.status == "skipped") + (
            1 if self.status in ("ok", "changed", "reboot-pending") else 0
        )

    def recap(self) -> HostRecap:
        """The host's recap line; a host that failed before any change counts one failure."""
        return HostRecap(
            host=self.host,
            status=self.status,
            ok=self.ok,
            changed=self.changed,
            failed=self.failed + (1 if self.status == "failed" and not self.failed else 0),
            unreachable=1 if self.status in ("unreachable", "hostkey-changed") else 0,
            hostkey_changed=1 if self.status == "hostkey-changed" else 0,
            skipped=1 if self.status == "skipped" else 0,
            rebooted=self.rebooted,
            seconds=self.seconds,
            message=self.message,
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["counts"] = {"ok": self.ok, "changed": self.changed, "failed": self.failed}
        return out


@dataclass
class RunResult:
    hosts: dict[str, HostResult]
    seconds: float = 0.0
    check: bool = False

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for(r.final for r in self.hosts.values())

    @property
    def check_exit_code(self) -> ExitCode:
        """`apply --check --detailed-exitcode`: a host that would change counts as pending."""
        return exit_code_for("pending" if r.status == "changed" else r.final
                             for r in self.hosts.values())  # fmt: skip

    def recap(self) -> tuple[HostRecap, ...]:
        return tuple(r.recap() for r in self.hosts.values())
