"""`gpunode smoke`: run the GPU smoke suite on each host, in its own environments."""

from __future__ import annotations

import sys
from typing import Any

import click

from gpunode.cli.common import inventory_name, load_selected
from gpunode.cli.options import (
    Choice,
    forks_option,
    inventory_argument,
    json_option,
    limit_option,
    no_tui_option,
)
from gpunode.components import CLI_TESTS
from gpunode.exitcodes import ExitCode

# The declaration alone (plain data), not the runner: `gpunode smoke --help` stays light.
TESTS = CLI_TESTS


@click.command()
@inventory_argument
@limit_option
@json_option
@click.option(
    "--only",
    multiple=True,
    type=Choice(TESTS),
    metavar="NAME",
    help=f"Run only this test (repeatable): {', '.join(TESTS)}.",
)
@forks_option
@no_tui_option
@click.option(
    "--python",
    "pythons",
    multiple=True,
    metavar="PATH",
    help="Another python on the hosts to run the framework tests in (repeatable); the system "
    "python3 and each conda env with torch or tensorflow are found by themselves.",
)
def smoke(
    inventory: str,
    limit: str | None,
    as_json: bool,
    only: tuple[str, ...],
    forks: int | None,
    no_tui: bool,
    pythons: tuple[str, ...],
) -> None:
    """Run the GPU smoke tests on each host of INVENTORY: nvidia-smi, a vectorAdd built with
    each CUDA toolkit, PyTorch (matmul TFLOP/s, copy bandwidth, cuDNN, a mixed-precision
    step), TensorFlow, and an NCCL all-reduce (and, where the stack declares it, TensorRT: an
    FP16 engine built from ONNX, checked against PyTorch); measurements are graded against the
    GPU model's expected figures. Tests run on the host with its own pythons; nothing is
    installed. In a terminal, each host's tests show as they finish, beside its GPUs
    (`--no-tui`: the report alone).

    `--only nccl-multinode` starts one torchrun per selected host, all meeting at the first
    host's rendezvous (inventory `nccl:`), for an all-reduce across the hosts: bus bandwidth
    and the transport NCCL chose, per host.

    Exit codes: 0 no test failed, 2 a test failed, 3 a host unreachable, 4 bad input,
    6 a host's key changed (or is revoked). Several: 6 > 2 > 3.
    """
    from gpunode.smoke.report import render
    from gpunode.smoke.session import SmokeSession
    from gpunode.transport.connect import take_become_passwords
    from gpunode.views.envelope import dumps

    inv, hosts = load_selected(inventory, limit)
    take_become_passwords(hosts)  # out of the environment before any child process starts
    session = SmokeSession(
        hosts, inv.identity, only=only, pythons=pythons, forks=forks, limit=limit
    )
    if not (as_json or no_tui) and sys.stdin.isatty() and sys.stdout.isatty():
        from gpunode.tui import run_smoke_tui

        code = run_smoke_tui(session, fleet=inventory_name(inventory))
        if session.wait(timeout=0 if code == ExitCode.INTERRUPTED else 30) is None:
            click.echo(f"the smoke run was left unfinished (exit {code or 1})", err=True)
            sys.exit(code or ExitCode.ERROR)
    else:
        session.run()
    run = session.wait()
    assert run is not None
    if as_json:
        hosts_json = [r.to_json() for r in run.results]
        click.echo(dumps("smoke", {"hosts": hosts_json, "exit_code": int(run.exit_code)}))
    else:
        click.echo(render(run.results))
        if any(h.gpus.hourly_cost for h in hosts):
            click.echo("\n" + fleet_cost_table(hosts))
    sys.exit(run.exit_code)


def fleet_cost_table(hosts: list[Any]) -> str:
    """The priced hosts' types with the newest measured figures (this run's first)."""
    from gpunode import records
    from gpunode.cost import gpu_types, latest
    from gpunode.views.cost import table

    types, _ = gpu_types(hosts, latest(records.load_run(p) for p in records.list_runs()))
    return table(types, [])
