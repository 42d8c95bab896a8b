"""`gpunode exporter INVENTORY`: every host's GPUs and gpunode's view of it, for Prometheus."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpunode.cli.common import load_selected
from gpunode.cli.options import inventory_argument, limit_option
from gpunode.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpunode.views.exporter import FleetCollector

DEFAULT_PORT = 10140
"""Outside Prometheus's 9100-9999, all taken (9835: nvidia_gpu_exporter); docs/monitoring.md."""


def parse_listen(text: str) -> tuple[str, int]:
    """ADDR:PORT (an IPv6 address in brackets: [::1]:10140) -> (address, port)."""
    addr, sep, port = text.rpartition(":")
    addr = addr[1:-1] if addr.startswith("[") and addr.endswith("]") else addr
    if not sep or not addr or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(
            f"{text!r} is not ADDR:PORT (e.g. 127.0.0.1:10140, 0.0.0.0:10140 or [::1]:10140)"
        )
    return addr, int(port)


@click.command("exporter")
@inventory_argument
@limit_option
@click.option(
    "--listen",
    default=f"127.0.0.1:{DEFAULT_PORT}",
    show_default=True,
    metavar="ADDR:PORT",
    help="Serve /metrics, /metrics?target=HOST and /targets here (0.0.0.0:PORT for every "
    "interface).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.5),
    default=15.0,
    show_default=True,
    metavar="S",
    help="Seconds between samples on each host.",
)
@click.option(
    "--names",
    type=click.Choice(["dcgm", "simple"]),
    default="dcgm",
    show_default=True,
    help="GPU metric names: dcgm-exporter's (DCGM_FI_DEV_GPU_UTIL, ...) or simple ones "
    "(gpu_usage_percent, gpu_memory_usage, gpu_temperature).",
)
@click.option(
    "--textfile",
    type=click.Path(file_okay=False, dir_okay=True, exists=True, writable=True, path_type=Path),
    metavar="DIR",
    help="Write DIR/gpunode.prom for node_exporter's textfile collector instead of serving.",
)
@click.option(
    "--once",
    is_flag=True,
    help="With --textfile: write once every host has sent a sample (or failed), then exit.",
)
def exporter(
    inventory: str,
    limit: str | None,
    listen: str,
    interval: float,
    names: str,
    textfile: Path | None,
    once: bool,
) -> None:
    """Prometheus metrics of every selected host, sampled from this controller.

    One long-lived channel per host streams `nvidia-smi --query-gpu ... -lms` (NVML for a
    `connection: local` host), as `gpunode top` does; nothing is installed or written on
    the hosts. Per GPU, dcgm-exporter's metric names and labels (gpu, UUID, pci_bus_id,
    device, modelName, Hostname, DCGM_FI_DRIVER_VERSION, plus inventory), so its dashboards
    work; per host (labels Hostname and inventory), gpunode_host_up and,
    from this controller's run records, gpunode_host_converged, gpunode_changes_pending,
    gpunode_last_apply_timestamp_seconds, the last smoke results and figures, and
    gpunode_doctor_findings.

    Serves http://ADDR:PORT/metrics (every host), /metrics?target=HOST (one host: Prometheus's
    multi-target way, so `instance` is the host) and /targets (the hosts, for an
    http_sd_config) until stopped (SIGTERM or Ctrl-C); docs/monitoring.md has the scrape
    config. Run records are this inventory's alone (its `name:`, else its path).

    With --textfile DIR it writes DIR/gpunode.prom atomically every interval instead, or
    once with --once (for a timer or cron): then success when every host sent a sample,
    the unreachable status when some host could not be read.
    """
    if once and textfile is None:
        click.echo("error: --once needs --textfile DIR", err=True)
        sys.exit(ExitCode.USAGE)
    address = parse_listen(listen) if textfile is None else None
    inv, hosts = load_selected(inventory, limit)
    if not hosts:
        click.echo("error: no hosts selected; check --limit", err=True)
        sys.exit(ExitCode.BAD_INPUT)

    from gpunode.monitor import NvmlSource
    from gpunode.monitor.hosts import first_views, sampling
    from gpunode.views.exporter import FleetCollector, registry_for, write_textfile
    from gpunode.views.hoststate import RunRecords

    use_nvml = any(h.connection == "local" for h in hosts) and NvmlSource.available()
    stale = 3 * interval + 5
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with sampling(
        hosts,
        interval=interval,
        use_nvml=use_nvml,
        stale_after=stale,
        processes=False,
        counters=True,
    ) as board:
        ident = inv.identity
        collector = FleetCollector(
            board.views,
            [h.name for h in hosts],
            names="simple" if names == "simple" else "dcgm",
            runs=RunRecords(inventory=ident),
            label=ident.label,
        )
        registry = registry_for(collector)
        if textfile is not None and once:
            wait = max(h.ssh.connect_timeout for h in hosts) + 5 + 2 * interval
            views = first_views(board, interval=min(interval, 2.0), timeout=wait)
            write_textfile(textfile, registry)
            sys.exit(ExitCode.OK if all(v.gpus for v in views) else ExitCode.UNREACHABLE)
        if textfile is not None:
            click.echo(f"writing {textfile / 'gpunode.prom'} every {interval:g}s", err=True)
            try:
                while not stop.wait(interval):
                    write_textfile(textfile, registry)
            except KeyboardInterrupt:
                pass
            return
        assert address is not None
        _serve(collector, address, stop)


def _serve(collector: FleetCollector, address: tuple[str, int], stop: threading.Event) -> None:
    from gpunode.views.exporthttp import ExporterServer

    host, port = address
    try:
        server = ExporterServer(collector, address)
    except OSError as exc:
        click.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        sys.exit(ExitCode.USAGE)
    server.start()
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"serving http://{shown}:{port}/metrics (and ?target=HOST, /targets)", err=True)
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
