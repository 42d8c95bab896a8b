"""Run many hosts: parallel forks, --serial batches, --max-fail abort of later batches, and
a stop (`Options.stop`) that starts no more hosts or changes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpunode.events import Bus, HostFinished, HostStatusChanged, RunFinished, RunStarted
from gpunode.execute import warm
from gpunode.execute.host import HostRun, Options
from gpunode.execute.result import HostResult, RunResult
from gpunode.hostpool import Opener, run_hosts
from gpunode.transport.base import Transport
from gpunode.transport.connect import module_for
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
    live: dict[str, HostResult] | None = None,
) -> RunResult:
    """Converge `hosts`; returns every host's result. Emits RunStarted ... RunFinished.

    `live` receives each host's result as its run starts (filled in as it goes), for a
    caller that cannot wait for the end (a run cut by a second interrupt)."""
    opts = options or Options()
    stop = opts.stop
    start = time.monotonic()
    bus.emit(RunStarted("", command=command, hosts=tuple(h.name for h in hosts), check=opts.check))
    warm.start(module_for(h) for h in hosts)
    results: dict[str, HostResult] = {}
    aborted = False
    for batch in batches(hosts, serial):
        if aborted or (stop is not None and stop.requested):
            why = "--max-fail reached" if aborted else stop.reason if stop else ""
            for h in batch:
                _skipped(bus, results, h.name, why)
            continue

        def work(transport: Transport, host: Host) -> HostResult:
            one = HostRun(transport, host, bus, opts)
            if live is not None:
                live[host.name] = one.result
            return one.run()

        kw = {"opener": opener} if opener is not None else {}
        outcomes = run_hosts(
            batch,
            work,
            bus=bus,
            forks=forks,
            become_password=become_password,
            stop=stop,
            **kw,
        )
        failed = 0  # --max-fail counts each batch on its own, as its hosts finish together
        for h in batch:
            o = outcomes[h.name]
            if o.status == "skipped":
                _skipped(bus, results, h.name, o.error.removeprefix("not started: "))
                continue
            if o.value is not None:
                r = o.value
            else:
                r = HostResult(h.name, "failed", o.error, seconds=round(o.seconds, 3))
                if o.status == "unreachable":
                    r.status = "hostkey-changed" if o.hostkey_changed else "unreachable"
            if stop is not None and stop.was_cut and r.status in ("failed", "unreachable"):
                r.status, r.message = "interrupted", f"cut while it ran: {r.message}"
            results[h.name] = r
            _finished(bus, r)
            if r.status in ("failed", "unreachable", "hostkey-changed"):
                failed += 1
        if max_fail is not None and 100.0 * failed / len(batch) > max_fail:
            aborted = True
    run = RunResult(results, seconds=round(time.monotonic() - start, 3), check=opts.check)
    code = stop.code if stop is not None and stop.requested else int(run.exit_code)
    bus.emit(RunFinished("", exit_code=code, seconds=run.seconds, hosts=run.recap()))
    return run


def _skipped(bus: Bus, results: dict[str, HostResult], name: str, why: str) -> None:
    results[name] = HostResult(name, "skipped", f"not started: {why}")
    bus.emit(HostStatusChanged(name, status="skipped", detail=why.removeprefix("--")))
    _finished(bus, results[name])


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
