"""One `gpunode smoke` from start to finish, whatever view shows it.

`SmokeSession` owns what a smoke run is made of: the hosts and the tests asked for, the
suite on every host and the cross-host all-reduce when it is asked for, each host's final
status, the exit status and the run record. The plain view calls `run()`; the terminal
UI runs it on its worker thread once it is up and reads `wait()`. Views only subscribe to
`bus`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpunode.components import MULTINODE
from gpunode.events import Bus, RunFinished, RunStarted
from gpunode.exitcodes import ExitCode, exit_code_for
from gpunode.hostpool import Opener
from gpunode.inventory.model import Host
from gpunode.records import InventoryId
from gpunode.smoke.multinode import run_multinode
from gpunode.smoke.record import record_smoke
from gpunode.smoke.runner import HostSmoke, smoke_hosts
from gpunode.transport.hostkeys import names_key_change


@dataclass(frozen=True)
class SmokeRun:
    """What a smoke run found: each host's results in the inventory's order, its status
    as the exit table ranks it, and the run record that keeps them."""

    results: list[HostSmoke]
    statuses: dict[str, str]
    exit_code: ExitCode
    seconds: float
    record: Path


class SmokeSession:
    def __init__(
        self,
        hosts: Sequence[Host],
        inventory: str | InventoryId,
        *,
        only: Sequence[str] = (),
        pythons: Sequence[str] = (),
        forks: int | None = None,
        limit: str | None = None,
        opener: Opener | None = None,
    ) -> None:
        self.hosts = list(hosts)
        self.inventory = inventory
        self.only = tuple(only)
        self.pythons = tuple(pythons)
        self.forks = forks
        self.limit = limit
        self.opener = opener
        self.bus = Bus()
        self._result: SmokeRun | None = None
        self._done = threading.Event()

    def run(self) -> None:
        """The suite on every host on this thread, emitting on `bus`; the record last."""
        try:
            self._result = self._smoke()
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> SmokeRun | None:
        """The result once the run ended; None when it did not within `timeout`."""
        return self._result if self._done.wait(timeout) else None

    def _smoke(self) -> SmokeRun:
        start = time.monotonic()
        self.bus.emit(RunStarted("", command="smoke", hosts=tuple(h.name for h in self.hosts)))
        suite = tuple(t for t in self.only if t != MULTINODE)
        results: list[HostSmoke] = []
        if suite or not self.only:
            results = smoke_hosts(
                self.hosts,
                self.bus,
                only=suite,
                pythons=self.pythons,
                forks=self.forks,
                opener=self.opener,
            )
        if MULTINODE in self.only:
            results = self._with_multinode(results)
        statuses = {r.host: _status(r) for r in results}
        code = exit_code_for(statuses.values())
        seconds = time.monotonic() - start
        self.bus.emit(RunFinished("", exit_code=int(code), seconds=seconds))
        options = {"limit": self.limit, "only": list(self.only), "python": list(self.pythons)}
        record = record_smoke(self.inventory, options, results, statuses, int(code), seconds)
        return SmokeRun(results, statuses, code, seconds, record)

    def _with_multinode(self, results: list[HostSmoke]) -> list[HostSmoke]:
        """The cross-host all-reduce's results added to each host's (or alone)."""
        multi = run_multinode(self.hosts, self.bus, finish=not results)
        if not results:
            return multi
        for before, after in zip(results, multi, strict=True):
            before.results += after.results
            before.unreachable = before.unreachable or after.unreachable
            before.seconds += after.seconds
        return results


def _status(result: HostSmoke) -> str:
    """A host's smoke outcome as the status `exit_code_for` ranks: a changed key apart."""
    if result.unreachable is not None and names_key_change(result.unreachable):
        return "hostkey-changed"
    return result.status
