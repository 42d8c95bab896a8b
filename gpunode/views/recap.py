"""The recap after a run, as Ansible's: ok / changed / failed / unreachable per host.

Rendered from `HostRecap` lines (`RunResult.recap()`, the same lines `RunFinished`
carries to the TUI). A host whose key changed counts as unreachable and says "host key
changed" on its line."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpunode.events import HostRecap
from gpunode.execute.result import RunResult
from gpunode.safetext import printable
from gpunode.views.envelope import dumps


def recap_lines(rows: Sequence[HostRecap]) -> list[str]:
    """One aligned line per host."""
    width = max([len(r.host) for r in rows] + [4])
    lines = []
    for r in rows:
        counts = (
            f"ok={r.ok:<3} changed={r.changed:<3} failed={r.failed:<3} "
            f"unreachable={r.unreachable:<2}"
        )
        extra = " host key changed" if r.hostkey_changed else ""
        extra += " rebooted" if r.rebooted else ""
        extra += " reboot pending" if r.status == "reboot-pending" else ""
        extra += " skipped" if r.skipped else ""
        line = f"{r.host:<{width}}  {counts} {r.seconds:6.1f}s{extra}"
        if r.message:
            line += f"  {r.message}"
        lines.append(line)
    return lines


def recap_text(run: RunResult) -> str:
    rows = run.recap()
    title = "RECAP (check: nothing was changed)" if run.check else "RECAP"
    total = f"{len(rows)} host{'s' * (len(rows) != 1)} in {run.seconds:.1f}s"
    return printable("\n".join([title, *recap_lines(rows), total]), lines=True)


def recap_json(run: RunResult, record: str, exit_code: int | None = None) -> str:
    """The last line of `apply --json`: the `recap` event, with the run record's path and the
    exit status (`exit_code`: a stopped run's, else the hosts')."""
    hosts = [dataclasses.asdict(r) for r in run.recap()]
    code = int(run.exit_code) if exit_code is None else exit_code
    payload = {"event": "recap", "hosts": hosts, "exit_code": code, "record": record}
    return dumps("apply-event", payload)
