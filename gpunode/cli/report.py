"""`gpunode report`: show a recorded run (the latest by default), or list them."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from gpunode.cli.options import json_option
from gpunode.exitcodes import ExitCode
from gpunode.safetext import printable


def _echo(text: str, *, nl: bool = True, err: bool = False) -> None:
    """A line of the record, escaped: a record holds host output (and may be edited)."""
    click.echo(printable(text, lines=True), nl=nl, err=err)


@click.command("report")
@click.argument("run", required=False)
@click.option("--list", "list_runs", is_flag=True, help="List recorded runs, oldest first.")
@click.option(
    "--host",
    "only_host",
    metavar="H",
    help="Only this host, with the full output of its failed step.",
)
@click.option(
    "--cost",
    "show_cost",
    is_flag=True,
    help="The GPU types of the run's inventory by measured work per cost (as `gpunode cost`).",
)
@json_option
def report(
    run: str | None, list_runs: bool, only_host: str | None, show_cost: bool, as_json: bool
) -> None:
    """Show RUN (an id, a prefix of one, or a path; the latest when omitted).

    Records live in the state directory's runs/ ($GPUNODE_STATE_DIR, else the user's state
    directory) and are kept until deleted."""
    from gpunode import records

    if list_runs:
        for path in records.list_runs():
            data = records.load_run(path)
            hosts = data.get("hosts", {})
            failed = sum(
                1
                for h in hosts.values()
                if h.get("status") in ("failed", "unreachable", "hostkey-changed")
            )
            _echo(
                f"{data['id']}  {data.get('command', '?'):<6} {data.get('status'):<9} "
                f"exit={data.get('exit_code')}  {len(hosts)} hosts, {failed} not converged"
                f"  {data.get('inventory', '')}"
            )
        return
    found = records.find_run(run)
    if found is None:
        where = records.runs_dir()
        _echo(
            f"error: no run {run!r} in {where}" if run else f"error: no runs in {where}", err=True
        )
        sys.exit(ExitCode.USAGE)
    data = records.load_run(found)
    if show_cost:
        _cost(data, as_json)
        return
    if only_host is not None:
        hosts = data.get("hosts", {})
        if only_host not in hosts:
            known = ", ".join(hosts) or "none"
            _echo(f"error: no host {only_host!r} in run {data['id']} (hosts: {known})", err=True)
            sys.exit(ExitCode.USAGE)
        data["hosts"] = {only_host: hosts[only_host]}
    if as_json:
        from gpunode.views.envelope import dumps

        click.echo(dumps("report", data))
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data.get("started", 0)))
    _echo(f"run {data['id']}: {data.get('command')} {data.get('inventory')}")
    _echo(f"started {started}, {data.get('status')}, exit code {data.get('exit_code')}")
    for name, h in data.get("hosts", {}).items():
        counts = h.get("counts", {})
        line = (
            f"{name}: {h.get('status')}  ok={counts.get('ok', 0)} "
            f"changed={counts.get('changed', 0)} failed={counts.get('failed', 0)}"
        )
        if h.get("rebooted"):
            line += f"  rebooted ({h.get('reboot_seconds', 0):.0f}s)"
        if h.get("message"):
            line += f"  {h['message']}"
        _echo(line)
        for c in h.get("changes", []):
            _echo(
                f"  {c['status']:<8} {c['title']} ({c['reason']}) {c['seconds']:.1f}s"
                + (f": {c['message']}" if c.get("message") else "")
            )
            if c.get("output"):
                if only_host is None:
                    _echo(f"    full output: gpunode report {data['id']} --host {name}")
                else:
                    _echo(step_output(c["output"]), nl=False)
        smoke = h.get("smoke") or {}
        for r in smoke.get("results", []):
            _echo(f"  smoke {r.get('status')}: {r.get('name')} {r.get('reason', '')}".rstrip())


def step_output(output: dict[str, Any]) -> str:
    """A failed step's command and full output, as the record keeps it."""
    code = output.get("exit_code")
    lines = [f"    $ {output.get('command', '')}", f"    exit {code if code is not None else '-'}"]
    for stream in ("stdout", "stderr"):
        text = str(output.get(stream) or "")
        cut = int(output.get(f"{stream}_cut") or 0)
        head = f"    --- {stream}"
        if cut:
            head += f" (its first {cut} bytes were cut; the last {len(text.encode())} kept)"
        lines.append(head if text or cut else f"{head}: empty")
        lines.extend(text.splitlines())
    return "\n".join(lines) + "\n"


def _cost(data: dict[str, Any], as_json: bool) -> None:
    """`gpunode cost` over the run's own inventory, with every record's figures."""
    from pathlib import Path

    from gpunode import records
    from gpunode.cli.common import load_selected
    from gpunode.cost import gpu_types, latest
    from gpunode.views.cost import payload, table
    from gpunode.views.envelope import dumps

    path = str(data.get("inventory") or "")
    if not Path(path).is_file():
        _echo(
            f"error: the inventory of run {data['id']} ({path}) is gone: its prices are there; "
            "run `gpunode cost INVENTORY` with the inventory as it is now",
            err=True,
        )
        sys.exit(ExitCode.BAD_INPUT)
    inv, hosts = load_selected(path, None)
    types, unpriced = gpu_types(hosts, latest(records.runs_of(inv.identity)))
    click.echo(dumps("cost", payload(types, unpriced)) if as_json else table(types, unpriced))
