"""Typed events: the only thing the work emits and the only thing views read.

The executor, fact gathering and the smoke runner publish events to a `Bus`;
the plain printer, `--json`, run records and the TUI subscribe. Events are
plain frozen dataclasses so that they serialise to JSON without surprises and
can cross threads safely. Secrets never go into an event.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
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
]


@dataclass(frozen=True)
class Event:
    host: str
    ts: float = field(default_factory=time.time, kw_only=True)

    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_json(self) -> dict[str, Any]:
        return {"event": self.kind, **dataclasses.asdict(self)}


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
    changes: tuple[dict[str, Any], ...]
    refused: str | None = None
    """Why the host cannot be converged at all (unsupported release, Secure Boot...)."""


@dataclass(frozen=True)
class ChangeStarted(Event):
    index: int
    total: int
    title: str
    role: str = ""


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
class SmokeResult(Event):
    result: dict[str, Any]
    """name, status (pass/warn/fail/skip), reason, value, expected, unit, seconds, env."""


@dataclass(frozen=True)
class HostFinished(Event):
    status: Literal["ok", "changed", "failed", "unreachable", "skipped"]
    ok: int = 0
    changed: int = 0
    failed: int = 0
    seconds: float = 0.0
    message: str = ""


@dataclass(frozen=True)
class RunFinished(Event):
    exit_code: int
    seconds: float


Subscriber = Callable[[Event], None]


class Bus:
    """Fan events out to subscribers, in order, from any thread."""

    def __init__(self) -> None:
        self._subs: list[Subscriber] = []
        self._lock = threading.Lock()

    def subscribe(self, fn: Subscriber) -> None:
        with self._lock:
            self._subs.append(fn)

    def emit(self, event: Event) -> None:
        with self._lock:
            subs = list(self._subs)
            for fn in subs:
                fn(event)
