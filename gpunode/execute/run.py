"""Run many hosts: parallel forks, --serial batches, --max-fail abort of later batches."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpunode.events import Bus, HostFinished, HostStatusChanged, RunFinished, RunStarted
from gpunode.execute.host import HostRun, Options
from gpunode.execute.result import HostResult, RunResult
from gpunode.hostpool import Opener, run_hosts
from gpunode.transport.base import Transport
from gpunode.transport.secret import Secret

if TYPE_CHECKING:
    from gpunode.inventory.model import Host


def batches(hosts: Sequence[Host], serial: int | None) -> list[list[Host]]:
    if not serial or serial >= len(hosts):
        return [list(hosts)]
    return [list(hosts[i : i + serial]) for i in range(0, len(hosts), serial)]


def apply(
    hosts: Sequence[Host],
    *,
    bus: Bus,
    options: Options | None = None,
    forks: int | None = None,
    serial: int | None = None,
    max_fail: float | None = None,
    become_password: Secret | None = None,
    opener: Opener | None = None,
    command: str = "apply",
) -> RunResult:
    """Converge `hosts`; returns every host's result. Emits RunStarted ... RunFinished."""
    opts = options or Options()
    start = time.monotonic()
    bus.emit(RunStarted("", command=command, hosts=tuple(h.name for h in hosts), check=opts.check))
    results: dict[str, HostResult] = {}
    aborted = False
    for batch in batches(hosts, serial):
        if aborted:
            for h in batch:
                results[h.name] = HostResult(h.name, "skipped", "not started: --max-fail reached")
                bus.emit(HostStatusChanged(h.name, status="skipped", detail="max-fail reached"))
                _finished(bus, results[h.name])
            continue

        def work(transport: Transport, host: Host) -> HostResult:
            return HostRun(transport, host, bus, opts).run()

        kw = {"opener": opener} if opener is not None else {}
        outcomes = run_hosts(
            batch,
            work,
            bus=bus,
            forks=forks,
            become_password=become_password,
            **kw,
        )
        failed = 0  # --max-fail counts each batch on its own, as its hosts finish together
        for h in batch:
            o = outcomes[h.name]
            if o.value is not None:
                r = o.value
            else:
                r = HostResult(h.name, "failed", o.error, seconds=round(o.seconds, 3))
                if o.status == "unreachable":
                    r.status = "hostkey-changed" if o.hostkey_changed else "unreachable"
            results[h.name] = r
            _finished(bus, r)
            if r.status in ("failed", "unreachable", "hostkey-changed"):
                failed += 1
        if max_fail is not None and 100.0 * failed / len(batch) > max_fail:
            aborted = True
    run = RunResult(results, seconds=round(time.monotonic() - start, 3), check=opts.check)
    bus.emit(RunFinished("", exit_code=int(run.exit_code), seconds=run.seconds, hosts=run.recap()))
    return run


def _finished(bus: Bus, r: HostResult) -> None:
    # The events (and the views built on them) know no "hostkey-changed": such a host
    # finishes as unreachable there, its message saying "host key changed"/"is revoked";
    # the recap, the record and the exit code (5) have the real status.
    bus.emit(
        HostFinished(
            r.host,
            status="unreachable" if r.status == "hostkey-changed" else r.status,
            ok=r.ok,
            changed=r.changed,
            failed=r.failed,
            seconds=r.seconds,
            message=r.message,
        )
    )


__all__ = ["Options", "apply", "batches"]
