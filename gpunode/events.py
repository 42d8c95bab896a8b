"""Typed events: what the work tells the views while it runs.

The executor, fact gathering, the smoke runner and `apply`'s session publish events
to a `Bus`; the plain printer, `--json` and the TUI subscribe (run records are
written from the run's result, not from events). Each event is a frozen dataclass,
and so is each payload a view reads (`PlannedChange`, `SmokeCheck`, `HostRecap`),
so views read fields, never guess dictionary keys; `to_json` gives `--json`'s
objects, named by `EVENT_NAMES`. `FactsGathered.facts` alone stays the facts model's
JSON: no view reads it. Secrets never go into an event.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

HostStatus = Literal[
    "waiting",
    "connecting",
    "gathering",
    "planning",
    "applying",
    "rebooting",
    "smoke",
    "ok",
    "changed",
    "failed",
    "unreachable",
    "skipped",
    "reboot-pending",
    "interrupted",
]


@dataclass(frozen=True)
class Event:
    host: str
    ts: float = field(default_factory=time.time, kw_only=True)

    @property
    def name(self) -> str:
        """The event's word in `--json` (`EVENT_NAMES`), e.g. "change-started"."""
        return EVENT_NAMES[type(self)]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.name}
        for f in dataclasses.fields(self):
            out[f.name] = _json(getattr(self, f.name))
        return out


def _json(value: Any) -> Any:
    """A payload as JSON data: its own `to_json` where it has one."""
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


@dataclass(frozen=True)
class PlannedChange:
    """One change of a host's plan as views show it: the planner's Change, its commands
    as `plan` prints them (a file's content on stdin is never in them)."""

    role: str
    task: str
    op: str
    reason: str
    commands: tuple[str, ...] = ()
    sudo: bool = True
    reboot: bool = False
    path: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return f"{self.role}: {self.task}" if self.role else self.task


@dataclass(frozen=True)
class SmokeCheck:
    """One smoke test's graded result. `record` is the whole result as the suite printed
    it and grading completed it (details included): what `--json` and records carry."""

    name: str
    status: str
    """pass, warn, fail or skip."""
    reason: str = ""
    value: Any = None
    expected: Any = None
    unit: str = ""
    seconds: float | None = None
    env: str | None = None
    record: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SmokeCheck:
        secs = record.get("seconds")
        env = record.get("env")
        return cls(
            name=str(record.get("name", "?")),
            status=str(record.get("status", "?")),
            reason=str(record.get("reason") or ""),
            value=record.get("value"),
            expected=record.get("expected"),
            unit=str(record.get("unit") or ""),
            seconds=float(secs) if isinstance(secs, int | float) else None,
            env=str(env) if env is not None else None,
            record=dict(record),
        )

    def to_json(self) -> dict[str, Any]:
        if self.record:
            return dict(self.record)
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}


@dataclass(frozen=True)
class HostRecap:
    """A host's line of the recap after a run: the plain view, `--json` and the TUI
    all show these. A host whose key changed is `hostkey-changed` here."""

    host: str
    status: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    hostkey_changed: int = 0
    skipped: int = 0
    rebooted: bool = False
    seconds: float = 0.0
    message: str = ""


@dataclass(frozen=True)
class RunStarted(Event):
    """`host` is "" for run-wide events."""

    command: str
    hosts: tuple[str, ...]
    check: bool = False


@dataclass(frozen=True)
class HostStatusChanged(Event):
    status: HostStatus
    detail: str = ""


@dataclass(frozen=True)
class HostConnecting(Event):
    target: str


@dataclass(frozen=True)
class HostConnected(Event):
    target: str
    seconds: float


@dataclass(frozen=True)
class HostUnreachable(Event):
    reason: str


@dataclass(frozen=True)
class FactsGathered(Event):
    facts: dict[str, Any]
    seconds: float


@dataclass(frozen=True)
class PlanReady(Event):
    changes: tuple[PlannedChange, ...]
    refused: str | None = None
    """Why the host cannot be converged at all (unsupported release, Secure Boot...)."""


@dataclass(frozen=True)
class ChangeStarted(Event):
    index: int
    total: int
    title: str
    role: str = ""
    commands: tuple[str, ...] = ()
    """Its steps' commands as `plan` shows them (a file's content on stdin is never in them)."""


@dataclass(frozen=True)
class CommandOutput(Event):
    """A chunk of live output from the command that is running."""

    index: int
    stream: Literal["stdout", "stderr"]
    text: str


@dataclass(frozen=True)
class ChangeFinished(Event):
    index: int
    title: str
    status: Literal["ok", "changed", "failed", "skipped"]
    seconds: float
    message: str = ""
    diff: str = ""


@dataclass(frozen=True)
class RebootStarted(Event):
    reason: str


@dataclass(frozen=True)
class RebootFinished(Event):
    seconds: float
    boot_id: str


@dataclass(frozen=True)
class RebootPending(Event):
    """`apply --no-reboot`: every other change is made; the host still needs this reboot."""

    reason: str


@dataclass(frozen=True)
class HookFinished(Event):
    """An inventory hook (`before_disrupt`, `after_disrupt`) ran on the host."""

    hook: str
    status: Literal["ok", "failed"]
    seconds: float
    message: str = ""


@dataclass(frozen=True)
class SmokeResult(Event):
    result: SmokeCheck


@dataclass(frozen=True)
class DoctorFinding(Event):
    """What `gpunode doctor` finds on a host whose smoke tests failed (one event each)."""

    rule: str
    severity: Literal["error", "warning", "info"]
    title: str
    evidence: str
    fix: str


@dataclass(frozen=True)
class HostFinished(Event):
    status: Literal[
        "ok", "changed", "failed", "unreachable", "skipped", "reboot-pending", "interrupted"
    ]
    ok: int = 0
    changed: int = 0
    failed: int = 0
    seconds: float = 0.0
    message: str = ""


@dataclass(frozen=True)
class RunInterrupted(Event):
    """The run was asked to stop (run-wide, `host` ""): no new change or host starts, each
    host's running command finishes; `cut`: a second interrupt closed the connections."""

    reason: str
    cut: bool = False


@dataclass(frozen=True)
class RunFinished(Event):
    exit_code: int
    seconds: float
    hosts: tuple[HostRecap, ...] = ()
    """The recap of the hosts this run converged (a retry's: only those it retried)."""


RolloutPhaseWord = Literal[
    "draining", "waiting", "applying", "restarting", "verifying", "resumed", "failed", "untouched"
]


@dataclass(frozen=True)
class RolloutWave(Event):
    """`gpunode upgrade`/`rollback` (run-wide, `host` ""): a wave starts (wave 1 is the
    canary when there is one)."""

    wave: int
    hosts: tuple[str, ...]
    canary: bool = False


@dataclass(frozen=True)
class RolloutPhase(Event):
    """One host's step in a rolling upgrade: draining, waiting (`detail`: "job 12"), applying,
    restarting (the scheduler's node daemon), verifying, resumed, failed (`detail`: why;
    the node stays drained), untouched (the rollout stopped before its wave)."""

    phase: RolloutPhaseWord
    wave: int = 0
    detail: str = ""


EVENT_NAMES: dict[type[Event], str] = {
    RunStarted: "run-started",
    HostStatusChanged: "host-status",
    HostConnecting: "host-connecting",
    HostConnected: "host-connected",
    HostUnreachable: "host-unreachable",
    FactsGathered: "facts-gathered",
    PlanReady: "plan-ready",
    ChangeStarted: "change-started",
    CommandOutput: "command-output",
    ChangeFinished: "change-finished",
    RebootStarted: "reboot-started",
    RebootFinished: "reboot-finished",
    RebootPending: "reboot-pending",
    HookFinished: "hook-finished",
    SmokeResult: "smoke-result",
    DoctorFinding: "doctor-finding",
    HostFinished: "host-finished",
    RunInterrupted: "run-interrupted",
    RunFinished: "run-finished",
    RolloutWave: "rollout-wave",
    RolloutPhase: "rollout-phase",
}
"""Every event's word in `--json` output (docs/json.md documents each): words, not class
names, so a renamed class never breaks a script."""

Subscriber = Callable[[Event], None]


class Bus:
    """Fan events out to subscribers, in order, from any thread.

    A subscriber whose output was closed (EPIPE: `gpunode apply --json | head`) is dropped
    and `on_closed` is called, from the emitting thread (so it must not emit)."""

    def __init__(self) -> None:
        self._subs: list[Subscriber] = []
        self._lock = threading.Lock()
        self.on_closed: Callable[[], None] | None = None

    def subscribe(self, fn: Subscriber) -> None:
        with self._lock:
            self._subs.append(fn)

    def emit(self, event: Event) -> None:
        with self._lock:
            subs = list(self._subs)
            for fn in subs:
                try:
                    fn(event)
                except BrokenPipeError:
                    self._subs.remove(fn)
                    if self.on_closed is not None:
                        self.on_closed()
