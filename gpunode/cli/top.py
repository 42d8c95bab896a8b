"""`gpunode top INVENTORY`: live GPU statistics from every selected host."""

from __future__ import annotations

import sys

import click

from gpunode.cli.common import load_selected
from gpunode.cli.options import inventory_argument, limit_option
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
def top(inventory: str, limit: str | None, interval: float) -> None:
    """Live GPU view of every host: utilisation, memory, temperature, power, clocks, processes.

    One long-lived channel per host streams `nvidia-smi --query-gpu ... -lms`; nothing is
    installed on the hosts. A host that drops is shown stale and reconnected with backoff.
    """
    _, hosts = load_selected(inventory, limit)
    if not hosts:
        click.echo("error: no hosts selected; check --limit", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    if not sys.stdout.isatty():
        click.echo("error: gpunode top needs a terminal", err=True)
        sys.exit(ExitCode.USAGE)

    from gpunode.monitor import NvmlSource
    from gpunode.monitor.hosts import sampling
    from gpunode.tui import run_top

    use_nvml = any(h.connection == "local" for h in hosts) and NvmlSource.available()
    stale = max(5.0, 5 * interval)
    with sampling(hosts, interval=interval, use_nvml=use_nvml, stale_after=stale) as board:
        code = run_top(board, title=f"gpunode top · {inventory}")
    sys.exit(code)
