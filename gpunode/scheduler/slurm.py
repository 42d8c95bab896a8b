"""Slurm through `scontrol` and `squeue`, run where the inventory's `slurm.controller` says.

Every argument is validated by the inventory (node names, the slurm.conf path) or built here
(reasons are cut to printable ASCII), and reaches a shell only as an argv quoted by the
transport, or with no shell at all on this machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from gpunode.scheduler import OnWait, SchedulerError
from gpunode.transport.base import CommandResult, Transport

Runner = Callable[[Sequence[str]], CommandResult]
POLL_S = 1.0
BUSY = {"ALLOCATED", "MIXED", "COMPLETING"}
"""States (or flags) of a node with jobs still on it."""
GONE = {"DOWN", "NOT_RESPONDING", "INVAL", "FAIL", "UNKNOWN"}
"""States of a node whose slurmd is not registered (or registered wrong)."""
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


def local_runner(conf: str | None) -> Runner:
    """scontrol on this machine, with SLURM_CONF when the inventory names a slurm.conf."""
    env = {**os.environ, "SLURM_CONF": conf} if conf else None

    def run(argv: Sequence[str]) -> CommandResult:
        t0 = time.monotonic()
        try:
            out = subprocess.run(
                list(argv), env=env, capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SchedulerError(f"{argv[0]}: {exc}") from None
        return CommandResult(
            " ".join(argv), out.returncode, out.stdout, out.stderr, time.monotonic() - t0
        )

    return run


def transport_runner(transport: Transport, conf: str | None) -> Runner:
    """scontrol on the controller host, over gpunode's own connection to it, through the
    host's `become` (draining and resuming are Slurm operator work: root or SlurmUser)."""
    env = {"SLURM_CONF": conf} if conf else None
    lock = threading.Lock()  # one connection, asked from each host's worker

    def run(argv: Sequence[str]) -> CommandResult:
        with lock:
            return transport.run(list(argv), sudo=True, env=env, timeout=60)

    return run


def clean_reason(reason: str) -> str:
    """A drain reason scontrol keeps as given: printable ASCII, no quotes, at most 200."""
    return _UNPRINTABLE.sub("?", reason).replace('"', "'")[:200]


def parse_show(text: str) -> dict[str, str]:
    """`scontrol show node -o NODE`'s one line as Key=Value pairs (Reason runs to the end
    of the line and may hold spaces: it is taken whole)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    fields: dict[str, str] = {}
    head, _, reason = line.partition(" Reason=")
    for word in head.split():
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
    if reason:
        fields["Reason"] = reason.strip()
    return fields


def _states(fields: dict[str, str]) -> set[str]:
    return set(fields.get("State", "").split("+"))


class Slurm:
    """The scheduler calls of docs/upgrade.md, for Slurm."""

    def __init__(self, run: Runner, poll: float = POLL_S) -> None:
        self._run = run
        self._poll = poll

    def _ok(self, argv: Sequence[str]) -> str:
        r = self._run(argv)
        if not r.ok:
            said = _UNPRINTABLE.sub("?", (r.stderr or r.stdout).strip())[-300:]
            raise SchedulerError(f"`{' '.join(argv[:3])} ...` failed (exit {r.exit_code}): {said}")
        return r.stdout

    def show(self, node: str) -> dict[str, str]:
        return parse_show(self._ok(["scontrol", "show", "node", "-o", node]))

    def drain(self, node: str, reason: str) -> None:
        self._update(node, "DRAIN", reason)

    def fail(self, node: str, reason: str) -> None:
        # DRAIN again: a node that never reached resume keeps it, with this reason
        self._update(node, "DRAIN", reason)

    def resume(self, node: str) -> None:
        self._ok(["scontrol", "update", f"NodeName={node}", "State=RESUME"])

    def _update(self, node: str, state: str, reason: str) -> None:
        self._ok(
            [
                "scontrol",
                "update",
                f"NodeName={node}",
                f"State={state}",
                f"Reason={clean_reason(reason)}",
            ]
        )

    def jobs(self, node: str) -> list[str]:
        out = self._ok(["squeue", "-h", "-w", node, "-o", "%i"])
        return [j for j in out.split() if j]

    def wait_drained(self, node: str, timeout: float, on_wait: OnWait) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = _states(self.show(node))
            jobs = self.jobs(node)
            if not (states & BUSY) and not jobs:
                return
            now = ", ".join(f"job {j}" for j in jobs) or "its jobs to finish"
            on_wait(now)
            if time.monotonic() > deadline:
                raise SchedulerError(
                    f"node {node} still runs {now} after {timeout:.0f}s (slurm.drain_timeout): "
                    "it stays drained; let the jobs end (or scancel them) and run again"
                )
            time.sleep(self._poll)

    def gres_ok(self, node: str, gpus: int | None, since: float) -> str | None:
        f = self.show(node)
        started = _when(f.get("SlurmdStartTime", ""))
        if started is None or started < since:
            return "its slurmd has not registered since it was restarted"
        states = _states(f)
        if any(s.endswith("*") for s in states):  # slurmctld's "not responding" mark
            return "the node is not responding yet"
        bad = {s.rstrip("*~#$@^-") for s in states} & GONE
        if bad:
            return f"the node is {'+'.join(sorted(bad))}: {f.get('Reason', 'no reason given')}"
        count = _gpu_count(f.get("Gres", ""))
        if gpus is not None and count != gpus:
            return f"Slurm counts {count} GPU(s) in its gres, the inventory {gpus}"
        if count == 0:
            return "Slurm's gres for the node has no GPU"
        return None


def _when(text: str) -> float | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return None


def _gpu_count(gres: str) -> int:
    """gpu:2, gpu:h200:8(S:0-1), or several joined by commas: the sum of gpu counts."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total
