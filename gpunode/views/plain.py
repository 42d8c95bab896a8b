"""The plain live view: one timestamped line per event that matters, for logs and pipes.

A change that runs long gets a heartbeat line every `heartbeat` seconds (its elapsed time
and its last line of output), so a log shows a 10-minute install is alive. The heartbeat
is this view's own clock: a thread that only formats what events already told it; the
executor, blocked in its command, has nothing to say between output chunks.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import TextIO

from gpunode.events import (
    ChangeFinished,
    ChangeStarted,
    CommandOutput,
    DoctorFinding,
    Event,
    HookFinished,
    HostFinished,
    HostStatusChanged,
    HostUnreachable,
    PlanReady,
    RebootFinished,
    RebootPending,
    RebootStarted,
    RunFinished,
    RunInterrupted,
    RunStarted,
    SmokeResult,
)
from gpunode.safetext import printable

HEARTBEAT_ENV = "GPUNODE_HEARTBEAT"
HEARTBEAT_DEFAULT = 15.0
LAST_LINE_MAX = 160


def heartbeat_interval() -> float:
    """Seconds between heartbeats of a running change: GPUNODE_HEARTBEAT, else 15."""
    try:
        value = float(os.environ.get(HEARTBEAT_ENV, HEARTBEAT_DEFAULT))
    except ValueError:
        return HEARTBEAT_DEFAULT
    return value if value > 0 else HEARTBEAT_DEFAULT


def stamp(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def last_line(text: str) -> str:
    """The last non-blank line of an output chunk (a progress bar's last redraw after \\r)."""
    for line in reversed(text.replace("\r", "\n").splitlines()):
        line = line.strip()
        if line:
            return line if len(line) <= LAST_LINE_MAX else line[: LAST_LINE_MAX - 1] + "…"
    return ""


@dataclass
class Running:
    """A change a host is running, as the events told it."""

    title: str
    started: float
    beat: float
    last: str = ""


class PlainPrinter:
    """Subscribe to a Bus; writes lines like `12:00:01 changed: [gpu1] driver: ... (3.2s)`."""

    def __init__(
        self,
        out: TextIO,
        *,
        verbose: bool = False,
        diff: bool = False,
        heartbeat: float | None = None,
    ) -> None:
        self.out = out
        self.verbose = verbose
        self.diff = diff
        self.heartbeat = heartbeat if heartbeat is not None else heartbeat_interval()
        self._running: dict[str, Running] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, e: Event) -> None:
        with self._lock:
            self._track(e)
            text = self.line(e)
            if text is not None:
                self._write(e.ts, text)
        if isinstance(e, ChangeStarted) and self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="plain-heartbeat", daemon=True)
            self._thread.start()
        if isinstance(e, RunFinished):
            self.close()

    def close(self) -> None:
        """Stop the heartbeat thread (the run is over)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _write(self, ts: float, text: str) -> None:
        t = stamp(ts)
        text = printable(text, lines=True)
        self.out.write("".join(f"{t} {ln}\n" for ln in text.split("\n")))
        self.out.flush()

    def _track(self, e: Event) -> None:
        if isinstance(e, ChangeStarted):
            now = time.monotonic()
            self._running[e.host] = Running(e.title, now, now)
        elif isinstance(e, CommandOutput):
            run = self._running.get(e.host)
            line = last_line(e.text)
            if run is not None and line:
                run.last = line
        elif isinstance(e, ChangeFinished | HostFinished | HostUnreachable | RebootStarted) or (
            isinstance(e, HostStatusChanged) and e.status in ("failed", "unreachable")
        ):  # a host that fails mid-change (sudo refused, gone silent) has no ChangeFinished
            self._running.pop(e.host, None)

    def _beat(self) -> None:
        tick = min(1.0, self.heartbeat / 4)
        while not self._stop.wait(tick):
            with self._lock:
                now = time.monotonic()
                for host, run in self._running.items():
                    if now - run.beat >= self.heartbeat:
                        run.beat = now
                        try:
                            self._write(time.time(), heartbeat_line(host, run, now))
                        except OSError:  # stdout closed: the next event's line says so
                            return

    def line(self, e: Event) -> str | None:
        h = f"[{e.host}]"
        if isinstance(e, RunStarted):
            mode = " (check: nothing will be changed)" if e.check else ""
            return f"{e.command} on {len(e.hosts)} host{'s' * (len(e.hosts) != 1)}{mode}"
        if isinstance(e, HostUnreachable):
            return f"unreachable: {h} {e.reason}"
        if isinstance(e, HostStatusChanged) and e.status == "gathering" and e.detail:
            return f"note: {h} {e.detail}"  # e.g. a stale host lock taken over
        if isinstance(e, PlanReady):
            if e.refused:
                return f"refused: {h} {e.refused}"
            n = len(e.changes)
            return f"plan: {h} {n} change{'s' * (n != 1)}" if n else f"ok: {h} already converged"
        if isinstance(e, ChangeStarted):
            text = f"running: {h} {e.title} ({e.index}/{e.total})"
            if self.verbose:
                text += "".join(f"\n  {h} $ {cmd}" for cmd in e.commands)
            return text
        if isinstance(e, ChangeFinished):
            word = {"skipped": "would change", "changed": "changed", "failed": "failed"}.get(
                e.status, e.status
            )
            text = f"{word}: {h} {e.title}"
            if e.message:
                text += f": {e.message}"
            if e.status != "skipped":
                text += f" ({e.seconds:.1f}s)"
            if self.diff and e.diff:
                text += "\n" + e.diff.rstrip("\n")
            return text
        if isinstance(e, RunInterrupted):
            if e.cut:
                return "cut: a second interrupt closed the hosts' connections: their commands end"
            return (f"stopping: {e.reason}: no new change or host starts; each host's running "
                    "command finishes (Ctrl-C again cuts them)")  # fmt: skip
        if isinstance(e, HostStatusChanged) and e.status == "interrupted":
            return f"interrupted: {h} {e.detail}"
        if isinstance(e, RebootStarted):
            return f"rebooting: {h} {e.reason}"
        if isinstance(e, RebootFinished):
            return f"rebooted: {h} new boot {e.boot_id} after {e.seconds:.1f}s"
        if isinstance(e, RebootPending):
            return f"reboot pending: {h} {e.reason} (--no-reboot: apply again to reboot)"
        if isinstance(e, HookFinished):
            why = f": {e.message}" if e.message else ""
            return f"hook {e.status}: {h} {e.hook} ({e.seconds:.1f}s){why}"
        if isinstance(e, DoctorFinding):
            head = f"doctor {e.severity}: {h} {e.rule}: {e.title}"
            return f"{head}\n  evidence: {e.evidence}\n  fix: {e.fix}"
        if isinstance(e, SmokeResult):
            r = e.result
            reason = f": {r.reason}" if r.reason else ""
            return f"smoke {r.status}: {h} {r.name}{reason}"
        if isinstance(e, CommandOutput) and self.verbose and e.text.strip():
            return "\n".join(f"  {h} {ln}" for ln in e.text.rstrip("\n").splitlines())
        return None


def heartbeat_line(host: str, run: Running, now: float) -> str:
    text = f"still running: [{host}] {run.title} ({now - run.started:.0f}s)"
    return f"{text}: {run.last}" if run.last else text
