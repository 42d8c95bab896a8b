"""One `apply` from start to finish, whatever view shows it.

`ApplySession` owns what a run is made of: the hosts and options, the confirmation
plan, the run record, the worker thread that converges, retries (with the run's own
--forks, --serial and --max-fail) and the final result. The plain view calls
`run()`; the terminal UI runs `run()` on its worker thread once it is up and calls
`retry(names)` on `r` (`start()` runs it on a thread of the session's own); the
caller then reads `finish()`. Views only subscribe to `bus`.

A run stops cooperatively: `request_stop` (the first Ctrl-C, SIGTERM, a closed stdout, the
TUI's quit) starts no new change or host and lets each host's running command finish;
`cut` (a second one) closes the connections. Both only set flags and emit
`RunInterrupted` from a thread of their own, so a signal handler or a view may call them.
The record is then finished "interrupted", hosts left mid-run said so.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunode.events import Bus, Event, HostFinished, HostStatusChanged, RunInterrupted
from gpunode.execute import inventorylock
from gpunode.execute.host import Options
from gpunode.execute.preview import plan_hosts
from gpunode.execute.result import HostResult, RunResult
from gpunode.execute.run import apply
from gpunode.hostpool import Opener, Outcome, Stop
from gpunode.records import InventoryId, Record
from gpunode.transport.secret import Secret

if TYPE_CHECKING:
    from gpunode.changes import HostPlan
    from gpunode.inventory.model import Host


@dataclass(frozen=True)
class Pacing:
    """How many hosts run at once and in which batches: the same for every retry."""

    forks: int | None = None
    serial: int | None = None
    max_fail: float | None = None


CUT_GRACE = 10.0
"""Seconds a cut run is waited for before its record is finished from what is known."""


class ApplySession:
    def __init__(
        self,
        hosts: Sequence[Host],
        options: Options,
        *,
        pacing: Pacing = Pacing(),
        become_password: Secret | None = None,
        opener: Opener | None = None,
    ) -> None:
        self.hosts = list(hosts)
        self.stop = Stop()
        self.options = dataclasses.replace(options, stop=self.stop)
        self.pacing = pacing
        self.become_password = become_password
        self.opener = opener
        self.bus = Bus()
        self.record: Record | None = None
        self.inventory_lock: inventorylock.InventoryLock | None = None
        self._result: RunResult | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._workers: list[threading.Thread] = []
        self._live: dict[str, HostResult] = {}
        self._where: dict[str, str] = {}
        """Each host's last status word, and whether it finished (for a cut run's record)."""
        self._cut_at: float | None = None
        self._said: list[threading.Thread] = []
        self.bus.subscribe(self._follow)

    def preview(self) -> dict[str, Outcome[HostPlan]]:
        """Every host's plan, for a confirmation; on a bus of its own (views see no run)."""
        return plan_hosts(
            self.hosts, self.options, forks=self.pacing.forks, become_password=self.become_password
        )

    def open_record(self, inventory: str | InventoryId, limit: str | None) -> Path:
        """Write the run record (status "running", every host waiting) before any work."""
        o, p = self.options, self.pacing
        options: dict[str, Any] = {
            "limit": limit,
            "tags": list(o.tags),
            "skip_tags": list(o.skip_tags),
            "check": o.check,
            "diff": o.diff,
            "forks": p.forks,
            "serial": p.serial,
            "max_fail": p.max_fail,
            "reboot_timeout": o.reboot_timeout,
            "allow_change_held": o.allow_change_held,
        }
        self.record = Record("apply", inventory, options)
        self.record.data["hosts"] = {h.name: {"status": "waiting"} for h in self.hosts}
        self.options.run_id = self.record.id  # the owner each host's lock names
        if self.inventory_lock is not None:
            self.inventory_lock.write(run=self.record.id)
        return self.record.save()

    def lock_inventory(self, inventory: str) -> None:
        """Hold the controller's lock on `inventory` for this process's life: a second
        apply of it here raises InventoryLocked, naming this one's pid and run."""
        self.inventory_lock = inventorylock.take(inventory)

    def run(self) -> None:
        """Converge every host, emitting on `bus`. Called on the main thread, the work runs
        on a worker thread while the main thread waits, free to take signals."""
        if threading.current_thread() is threading.main_thread():
            self.start()
            self.await_stop()
            return
        try:
            result = self._apply(self.hosts)
            with self._lock:
                self._result = result
        finally:
            self._done.set()

    def start(self) -> None:
        """`run()` on a worker thread."""
        self._spawn(self.run, "gpunode-run")

    def retry(self, names: Sequence[str]) -> None:
        """Run these hosts again on a worker thread, on the same bus and with the same
        options and pacing; their new results replace the old ones."""
        again = [h for h in self.hosts if h.name in set(names)]

        def work() -> None:
            rerun = self._apply(again)
            with self._lock:
                if self._result is not None:
                    self._result.hosts.update(rerun.hosts)

        self._spawn(work, "gpunode-retry")

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """The result once the first run ended (None: not within `timeout`), after waiting
        as long again for retries in flight; a retry still running is left out of it."""
        if not self._done.wait(timeout):
            return None
        for t in list(self._workers):
            t.join(timeout)
        return self._result

    def finish(self, timeout: float | None = None) -> RunResult | None:
        """`wait`, then write the result into the run record (when there is one). A stopped
        run is "interrupted"; one cut and not back in time ends with what is known."""
        result = self.wait(timeout)
        for said in self._said:  # the run-interrupted event is out before the recap
            said.join(1.0)
        if result is None and self.stop.requested:
            result = self._known()
        if result is not None and self.record is not None:
            with self._lock:
                hosts = {n: r.to_json() for n, r in result.hosts.items()}
                code, seconds = self.exit_code(result), result.seconds
            status = "interrupted" if self.stop.requested else "finished"
            self.record.finish(hosts, code, seconds, status=status)
        return result

    def exit_code(self, result: RunResult, *, detailed: bool = False) -> int:
        """The run's exit status: the stop's (130, 141, 143) when it was stopped."""
        if self.stop.requested:
            return self.stop.code
        return int(result.check_exit_code if detailed else result.exit_code)

    # -- stopping ------------------------------------------------------------------------

    def request_stop(self, reason: str, code: int) -> None:
        """Start no new change or host; each host's running command finishes."""
        if self.stop.request(reason, code):
            self._announce(RunInterrupted("", reason=reason))

    def cut(self) -> None:
        """Stop, and close every host's connection: the running commands end now."""
        if self.stop.was_cut:
            return
        self._cut_at = time.monotonic()
        self.stop.cut()
        self._announce(RunInterrupted("", reason=self.stop.reason, cut=True))

    def await_stop(self) -> None:
        """Wait (in short naps, so signals are taken) until the run ended, or a cut run's
        grace is over."""
        while not self._done.wait(0.2):
            if self._cut_at is not None and time.monotonic() - self._cut_at > CUT_GRACE:
                return

    def _announce(self, event: Event) -> None:
        # never emit from the caller's thread: it may be inside the bus (a view whose
        # output closed) or a signal handler that interrupted an emit
        said = threading.Thread(target=self.bus.emit, args=(event,), daemon=True)
        self._said.append(said)
        said.start()

    def _follow(self, e: Event) -> None:
        if isinstance(e, HostStatusChanged):
            self._where.setdefault(e.host, e.status)
            if self._where[e.host] != "finished":
                self._where[e.host] = e.status
        elif isinstance(e, HostFinished):
            self._where[e.host] = "finished"

    def _known(self) -> RunResult:
        """A cut run whose work did not come back: each host as far as it is known."""
        hosts: dict[str, HostResult] = {}
        for h in self.hosts:
            live = self._live.get(h.name)
            where = self._where.get(h.name, "waiting")
            if live is None:
                live = HostResult(h.name, "skipped", f"not started: {self.stop.reason}")
            elif where != "finished":
                live.status = "interrupted"
                live.message = f"cut while {where}, {live.changed} change(s) made"
            hosts[h.name] = live
        return RunResult(hosts, check=self.options.check)

    def _apply(self, hosts: Sequence[Host]) -> RunResult:
        p = self.pacing
        return apply(
            hosts,
            bus=self.bus,
            options=self.options,
            forks=p.forks,
            serial=p.serial,
            max_fail=p.max_fail,
            become_password=self.become_password,
            opener=self.opener,
            live=self._live,
        )

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        self._workers.append(t)
        t.start()
