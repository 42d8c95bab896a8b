"""`gpunode report`: show a recorded run (the latest by default), or list them."""

from __future__ import annotations

import json
import sys
import time

import click

from gpunode.cli.options import json_option
from gpunode.exitcodes import ExitCode


@click.command("report")
@click.argument("run", required=False)
@click.option("--list", "list_runs", is_flag=True, help="List recorded runs, oldest first.")
@json_option
def report(run: str | None, list_runs: bool, as_json: bool) -> None:
    """Show RUN (an id, a prefix of one, or a path; the latest when omitted)."""
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
            click.echo(
                f"{data['id']}  {data.get('command', '?'):<6} {data.get('status'):<9} "
                f"exit={data.get('exit_code')}  {len(hosts)} hosts, {failed} not converged"
                f"  {data.get('inventory', '')}"
            )
        return
    found = records.find_run(run)
    if found is None:
        where = records.runs_dir()
        click.echo(
            f"error: no run {run!r} in {where}" if run else f"error: no runs in {where}", err=True
        )
        sys.exit(ExitCode.USAGE)
    data = records.load_run(found)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data.get("started", 0)))
    click.echo(f"run {data['id']}: {data.get('command')} {data.get('inventory')}")
    click.echo(f"started {started}, {data.get('status')}, exit code {data.get('exit_code')}")
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
        click.echo(line)
        for c in h.get("changes", []):
            click.echo(
                f"  {c['status']:<8} {c['title']} ({c['reason']}) {c['seconds']:.1f}s"
                + (f": {c['message']}" if c.get("message") else "")
            )
        smoke = h.get("smoke") or {}
        for r in smoke.get("results", []):
            click.echo(f"  smoke {r.get('status')}: {r.get('name')} {r.get('reason', '')}".rstrip())
