"""`gpunode top INVENTORY`: live GPU statistics from every selected host."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from gpunode.cli.common import EXIT_BAD_INPUT, inventory_argument, limit_option, load_selected

if TYPE_CHECKING:
    from gpunode.inventory.model import Host
    from gpunode.monitor.sampler import SourceFactory


def source_for(host: Host, interval: float, use_nvml: bool) -> SourceFactory:
    """How to reach one host's GPUs: NVML in-process for this machine when it works,
    otherwise one long-lived nvidia-smi stream over the host's transport."""
    from gpunode.monitor.sources import NvmlSource, SmiSource, Source

    def make() -> Source:
        if host.connection == "local" and use_nvml:
            return NvmlSource(host.name, interval=interval)
        from gpunode.transport.connect import open_transport

        return SmiSource(host.name, open_transport(host), interval=interval)

    return make


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
        sys.exit(EXIT_BAD_INPUT)
    if not sys.stdout.isatty():
        click.echo("error: gpunode top needs a terminal", err=True)
        sys.exit(EXIT_BAD_INPUT)

    from gpunode.monitor import Board, NvmlSource, Sampler
    from gpunode.tui import run_top

    use_nvml = any(h.connection == "local" for h in hosts) and NvmlSource.available()
    board = Board([h.name for h in hosts], stale_after=max(5.0, 5 * interval))
    sampler = Sampler(board, {h.name: source_for(h, interval, use_nvml) for h in hosts})
    sampler.start()
    try:
        code = run_top(board, title=f"gpunode top · {inventory}")
    finally:
        sampler.stop()
    sys.exit(code)
