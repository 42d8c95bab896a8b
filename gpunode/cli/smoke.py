"""`gpunode smoke`: run the GPU smoke suite on each host, in its own environments."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from gpunode.cli.common import load_selected
from gpunode.cli.options import forks_option, inventory_argument, json_option, limit_option
from gpunode.exitcodes import exit_code_for

if TYPE_CHECKING:
    from gpunode.events import Bus
    from gpunode.inventory.model import Host
    from gpunode.smoke.runner import HostSmoke

# Kept here (not imported from the runner) so `gpunode smoke --help` stays light.
TESTS = (
    "nvidia-smi",
    "cuda-vectoradd",
    "torch",
    "torch-matmul",
    "tensorflow",
    "nccl-allreduce",
    "tensorrt",
    "nccl-multinode",
)


@click.command()
@inventory_argument
@limit_option
@json_option
@click.option(
    "--only",
    multiple=True,
    type=click.Choice(TESTS),
    metavar="NAME",
    help=f"Run only this test (repeatable): {', '.join(TESTS)}.",
)
@forks_option
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
    pythons: tuple[str, ...],
) -> None:
    """Run the GPU smoke tests on each host of INVENTORY: nvidia-smi, a vectorAdd built with
    each CUDA toolkit, PyTorch (matmul TFLOP/s, copy bandwidth, cuDNN, a mixed-precision
    step), TensorFlow, and an NCCL all-reduce (and, where the stack declares it, TensorRT: an
    FP16 engine built from ONNX, checked against PyTorch); measurements are graded against the
    GPU model's expected figures. Tests run on the host with its own pythons; nothing is
    installed.

    `--only nccl-multinode` starts one torchrun per selected host, all meeting at the first
    host's rendezvous (inventory `nccl:`), for an all-reduce across the hosts: bus bandwidth
    and the transport NCCL chose, per host.

    Exit codes: 0 no test failed, 2 a test failed, 3 a host unreachable, 4 bad input,
    6 a host's key changed (or is revoked). Several: 6 > 2 > 3.
    """
    from gpunode.events import Bus, RunFinished, RunStarted
    from gpunode.smoke.record import record_smoke
    from gpunode.smoke.report import render
    from gpunode.smoke.runner import smoke_hosts
    from gpunode.transport.connect import take_become_passwords
    from gpunode.views.envelope import dumps

    start = time.monotonic()
    _, hosts = load_selected(inventory, limit)
    take_become_passwords(hosts)  # out of the environment before any child process starts
    bus = Bus()
    bus.emit(RunStarted("", command="smoke", hosts=tuple(h.name for h in hosts)))
    suite = tuple(t for t in only if t != "nccl-multinode")
    results = []
    if suite or not only:
        results = smoke_hosts(hosts, bus, only=suite, pythons=pythons, forks=forks)
    if "nccl-multinode" in only:
        results = _with_multinode(hosts, bus, results)
    statuses = {r.host: _status(r) for r in results}
    code = exit_code_for(statuses.values())
    seconds = time.monotonic() - start
    bus.emit(RunFinished("", exit_code=int(code), seconds=seconds))
    options = {"limit": limit, "only": list(only), "python": list(pythons)}
    record_smoke(inventory, options, results, statuses, int(code), seconds)
    if as_json:
        click.echo(
            dumps("smoke", {"hosts": [r.to_json() for r in results], "exit_code": int(code)})
        )
    else:
        click.echo(render(results))
        if any(h.gpus.hourly_cost for h in hosts):
            click.echo("\n" + fleet_cost_table(hosts))
    sys.exit(code)


def fleet_cost_table(hosts: list[Any]) -> str:
    """The priced hosts' types with the newest measured figures (this run's first)."""
    from gpunode import records
    from gpunode.cost import gpu_types, latest
    from gpunode.views.cost import table

    types, _ = gpu_types(hosts, latest(records.load_run(p) for p in records.list_runs()))
    return table(types, [])


def _with_multinode(hosts: list[Host], bus: Bus, results: list[HostSmoke]) -> list[HostSmoke]:
    """The cross-host all-reduce's results added to each host's (or alone)."""
    from gpunode.smoke.multinode import run_multinode

    multi = run_multinode(hosts, bus, finish=not results)
    if not results:
        return multi
    for before, after in zip(results, multi, strict=True):
        before.results += after.results
        before.unreachable = before.unreachable or after.unreachable
        before.seconds += after.seconds
    return results


def _status(result: HostSmoke) -> str:
    """A host's smoke outcome as the status `exit_code_for` ranks: a changed key apart."""
    from gpunode.transport.hostkeys import names_key_change

    if result.unreachable is not None and names_key_change(result.unreachable):
        return "hostkey-changed"
    return result.status
