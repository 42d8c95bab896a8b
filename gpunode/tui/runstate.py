"""The run as the views see it, rebuilt from events alone (no Textual here).

`RunState.apply(event)` returns the host whose row changed ("" for run-wide
changes), so a view redraws only what moved. The recap is not worked out here: it
is the executor's own (`RunFinished.hosts`), kept per host across retries, and its
counts replace the live ones when it comes.

Progress counts what the executor runs: a plan's reboot is no change of its own (the
executor reboots after the rest; the recap counts no change for it), and a failed change
is no progress. A host plans again after its repository is configured and after a reboot:
what ran stays, the rest is the new plan.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpunode import events as ev

OUTPUT_LINES = 2000
FINAL = frozenset(
    {"ok", "changed", "failed", "unreachable", "skipped", "reboot-pending", "interrupted"}
)
DONE = frozenset({"ok", "changed", "skipped"})
"""A change's ChangeFinished statuses that are progress (a failed change is not)."""
RAN = DONE | {"failed", "running"}


def only_reboot(c: ev.PlannedChange) -> bool:
    """The plan's reboot: it runs nothing itself, the executor reboots after the rest."""
    return c.reboot and not c.commands


@dataclass(eq=False)
class Step:
    """One entry of a host's plan and what became of it: "" (to do), "running", a
    ChangeFinished status, or for the reboot "rebooting" / "rebooted"."""

    change: ev.PlannedChange
    status: str = ""

    @property
    def counts(self) -> bool:
        """A change the executor runs (the reboot only where it ran as one, in --check)."""
        return not only_reboot(self.change) or self.status in RAN


@dataclass
class HostProgress:
    """One host as the run view shows it, folded from the events."""

    name: str
    status: str = "waiting"
    detail: str = ""
    step: str = ""
    ok: int = 0
    changed: int = 0
    failed: int = 0
    started: float | None = None
    finished: float | None = None
    steps: list[Step] = field(default_factory=list)
    refused: str | None = None
    diffs: list[tuple[str, str]] = field(default_factory=list)
    output: deque[str] = field(default_factory=lambda: deque(maxlen=OUTPUT_LINES))
    partial: str = ""  # output after the last newline
    lines_total: int = 0  # lines ever added (the deque forgets old ones)
    message: str = ""
    smoke: dict[str, ev.SmokeCheck] = field(default_factory=dict)
    doctor: list[ev.DoctorFinding] = field(default_factory=list)
    """doctor's findings on a host whose smoke tests failed."""

    @property
    def final(self) -> bool:
        return self.status in FINAL

    @property
    def total(self) -> int:
        """The changes the executor runs, planned so far (the reboot aside)."""
        return sum(1 for s in self.steps if s.counts)

    @property
    def done(self) -> int:
        """Changes finished, failed ones not."""
        return sum(1 for s in self.steps if s.status in DONE)

    def replan(self, changes: Iterable[ev.PlannedChange]) -> None:
        """What ran (or is running, or rebooted) stays; the new plan replaces the rest."""
        self.steps = [s for s in self.steps if s.status] + [Step(c) for c in changes]

    def step_for(self, title: str, *, finished: bool) -> Step:
        """The plan's entry a change event is about: the next to do with its title (when
        it finished, the running one first, else the running one whatever its title), else
        a new entry (a change no plan named)."""
        wanted = ("running", "") if finished else ("",)
        for status in wanted:
            for s in self.steps:
                if s.status == status and s.change.title == title:
                    return s
        running = [s for s in self.steps if s.status == "running"]
        if finished and running:
            return running[0]
        s = Step(ev.PlannedChange(role="", task=title, op="", reason=""))
        self.steps.append(s)
        return s

    def position(self, step: Step) -> int:
        """`step`'s number among the changes that count (1-based)."""
        counted = [s for s in self.steps if s.counts]
        return next(i for i, s in enumerate(counted, 1) if s is step)

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return (self.finished if self.finished is not None else now) - self.started

    def add_line(self, line: str) -> None:
        self.output.append(line)
        self.lines_total += 1

    def add_output(self, text: str) -> None:
        """Append a chunk of output, split anywhere; \r-only progress keeps its last state."""
        *done, self.partial = (self.partial + text).split("\n")
        for line in done:
            self.add_line(line.rstrip("\r").rsplit("\r", 1)[-1])

    def lines_since(self, seen: int) -> list[str]:
        """Lines added after the first `seen` (as many as are still kept)."""
        new = self.lines_total - seen
        if new <= 0:
            return []
        return list(self.output)[-new:]


class RunState:
    def __init__(self, hosts: Iterable[str] = (), clock: Callable[[], float] = time.time) -> None:
        self.hosts: dict[str, HostProgress] = {h: HostProgress(h) for h in hosts}
        self.clock = clock
        self.command = ""
        self.running = False
        self.started: float | None = None
        self.seconds: float | None = None
        self.exit_code: int | None = None
        self.finished: dict[str, ev.HostRecap] = {}

    def host(self, name: str) -> HostProgress:
        h = self.hosts.get(name)
        if h is None:
            h = self.hosts[name] = HostProgress(name)
        return h

    def retry(self, names: Iterable[str]) -> None:
        """Hosts about to run again start from a clean row."""
        for n in names:
            old = self.host(n)
            self.hosts[n] = HostProgress(n, smoke={})
            del old
        self.running = True
        self.exit_code = None

    def retryable(self) -> list[str]:
        return [h.name for h in self.hosts.values() if h.status in ("failed", "unreachable")]

    def _begin(self, h: HostProgress, ts: float) -> None:
        if h.started is None:
            h.started = ts

    def apply(self, e: ev.Event) -> str | None:
        if isinstance(e, ev.RunStarted):
            self.command = e.command
            self.running = True
            self.started = self.started or e.ts
            self.exit_code = None
            for n in e.hosts:
                self.host(n)
            return ""
        if isinstance(e, ev.RunFinished):
            self.running = False
            self.exit_code = e.exit_code
            self.seconds = e.seconds
            self.finished.update((r.host, r) for r in e.hosts)
            for r in e.hosts:  # the recap's counts are the truth
                h = self.host(r.host)
                h.ok, h.changed, h.failed = r.ok, r.changed, r.failed
            return ""
        if not e.host:
            return None
        h = self.host(e.host)
        if isinstance(e, ev.HostStatusChanged):
            h.status, h.detail = e.status, e.detail
            if e.status != "waiting":
                self._begin(h, e.ts)
            if e.status in FINAL:
                h.finished = e.ts
        elif isinstance(e, ev.RolloutPhase):  # `gpunode upgrade`'s steps around the apply
            h.detail = e.phase + (f": {e.detail}" if e.detail else "")
            if e.phase == "failed":
                h.status, h.message, h.step = "failed", e.detail, ""
            elif e.phase != "applying":  # the apply's own events say how that goes
                h.status, h.step = e.phase, h.detail
        elif isinstance(e, ev.HostConnecting):
            self._begin(h, e.ts)
            h.status, h.detail = "connecting", e.target
        elif isinstance(e, ev.HostConnected):
            h.detail = f"connected in {e.seconds:.1f}s"
        elif isinstance(e, ev.HostUnreachable):
            self._begin(h, e.ts)
            h.status, h.message, h.step, h.finished = "unreachable", e.reason, "", e.ts
        elif isinstance(e, ev.FactsGathered):
            h.detail = f"facts in {e.seconds:.1f}s"
        elif isinstance(e, ev.PlanReady):
            h.replan(e.changes)
            h.refused = e.refused
            if e.refused:
                h.message = e.refused
        elif isinstance(e, ev.ChangeStarted):
            self._begin(h, e.ts)
            if h.status not in ("rebooting",):
                h.status = "applying"
            step = h.step_for(e.title, finished=False)
            step.status = "running"
            h.step = f"[{h.position(step)}/{h.total}] {e.title}"
            if h.partial:
                h.add_output("\n")
            h.add_line(f"── {h.step}")
        elif isinstance(e, ev.CommandOutput):
            h.add_output(e.text)
        elif isinstance(e, ev.ChangeFinished):
            h.step_for(e.title, finished=True).status = e.status
            if e.status in ("ok", "skipped"):  # the recap's ok counts skipped changes
                h.ok += 1
            elif e.status == "changed":
                h.changed += 1
            elif e.status == "failed":
                h.failed += 1
                h.message = e.message
            if e.diff:
                h.diffs.append((e.title, e.diff))
        elif isinstance(e, ev.RebootStarted):
            h.status, h.step = "rebooting", f"reboot: {e.reason}"
            self._reboot_steps(h, e.reason, "", "rebooting")
        elif isinstance(e, ev.RebootFinished):
            h.status, h.step = "applying", f"rebooted in {e.seconds:.0f}s"
            self._reboot_steps(h, "", "rebooting", "rebooted")
        elif isinstance(e, ev.DoctorFinding):
            h.doctor.append(e)
        elif isinstance(e, ev.SmokeResult):
            h.smoke[e.result.name] = e.result
            if not h.final:
                h.status, h.step = "smoke", f"smoke: {e.result.name}"
        elif isinstance(e, ev.HostFinished):
            h.status = e.status
            # A host that failed before (or after) its changes counts one failure, as
            # HostResult.recap counts it.
            failed = e.failed or (1 if e.status == "failed" else 0)
            h.ok, h.changed, h.failed = e.ok, e.changed, failed
            for s in h.steps:  # a change cut off (sudo refused, host gone) ends with its host
                if s.status == "running":
                    s.status = e.status if e.status in ("failed", "unreachable") else ""
            h.finished = e.ts
            self._begin(h, e.ts - e.seconds)
            h.step = ""
            if e.message:
                h.message = e.message
        else:
            return None
        return h.name

    @staticmethod
    def _reboot_steps(h: HostProgress, reason: str, was: str, now: str) -> None:
        """The plan's reboot entries go `was` -> `now`; a reboot no plan named (a module
        reload refused: the executor reboots instead) gets an entry of its own."""
        found = [s for s in h.steps if only_reboot(s.change) and s.status == was]
        if not found and reason:
            found = [Step(ev.PlannedChange(role="", task="reboot", op="reboot",
                                           reason=reason, reboot=True))]  # fmt: skip
            h.steps += found
        for s in found:
            s.status = now

    def recap(self) -> list[ev.HostRecap]:
        """The recap lines the runs reported, in the hosts' order."""
        return [self.finished[n] for n in self.hosts if n in self.finished]
