"""`gpunode top INVENTORY`: live GPU statistics from every selected host."""

from __future__ import annotations

import sys

import click

from gpunode.cli.common import inventory_name, load_selected
from gpunode.cli.options import inventory_argument, json_option, limit_option
from gpunode.exitcodes import ExitCode


@click.command("top")
@inventory_argument
@limit_option
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    metavar="S",
    help="Seconds between samples on each host.",
)
@click.option("--once", is_flag=True, help="Print one sample of every host and exit.")
@json_option
def top(inventory: str, limit: str | None, interval: float, once: bool, as_json: bool) -> None:
    """Live GPU view of every host: utilisation, memory, temperature, power, clocks, processes.

    One long-lived channel per host streams `nvidia-smi --query-gpu ... -lms`; nothing is
    installed on the hosts. A host that drops is shown stale and reconnected with backoff.

    With --once (no terminal needed), print one sample of every host and exit: success
    when every host sent one, the unreachable status when some host could not be read.
    --json prints one `top-sample` JSON line per host.
    """
    _, hosts = load_selected(inventory, limit)
    if not hosts:
        click.echo("error: no hosts selected; check --limit", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    if as_json and not once:
        click.echo("error: --json needs --once (the live view is for a terminal)", err=True)
        sys.exit(ExitCode.USAGE)
    if not once and not sys.stdout.isatty():
        click.echo("error: gpunode top needs a terminal (or --once)", err=True)
        sys.exit(ExitCode.USAGE)

    from gpunode.monitor import NvmlSource
    from gpunode.monitor.hosts import first_views, sampling

    use_nvml = any(h.connection == "local" for h in hosts) and NvmlSource.available()
    stale = max(5.0, 5 * interval)
    with sampling(hosts, interval=interval, use_nvml=use_nvml, stale_after=stale) as board:
        if once:
            wait = max(h.ssh.connect_timeout for h in hosts) + 5 + 2 * interval
            views = first_views(board, interval=interval, timeout=wait)
        else:
            from gpunode.tui import run_top

            fleet = inventory_name(inventory)
            sys.exit(run_top(board, title=f"gpunode top · {fleet}", fleet=fleet))
    from gpunode.views.envelope import dumps
    from gpunode.views.top import sample_json, sample_text

    for view in views:
        click.echo(dumps("top-sample", sample_json(view)) if as_json else sample_text(view))
    sys.exit(ExitCode.OK if all(v.gpus for v in views) else ExitCode.UNREACHABLE)
