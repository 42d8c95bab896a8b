"""`gpunode upgrade` and `gpunode rollback`: rolling upgrades through a scheduler's drain.

docs/upgrade.md is the recipe. Both build the hosts' waves and hand them to
`gpunode.rollout.runner.Rollout`; rollback's hosts are the inventory's, each with its driver
pinned to the release the upgrade's record kept from before it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from gpunode.cli import options as opt
from gpunode.cli.common import become_password, load_selected
from gpunode.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpunode.inventory.model import Host
    from gpunode.records import InventoryId
    from gpunode.rollout.before import Before
    from gpunode.scheduler import Scheduler


def rollout_options(fn: Any) -> Any:
    decorators = [
        click.option(
            "--canary",
            type=click.IntRange(0),
            default=1,
            show_default=True,
            help="Hosts upgraded and verified first, alone; 0: no canary.",
        ),
        click.option(
            "--wave-size",
            default="1",
            show_default=True,
            metavar="N|PCT%",
            help="Hosts per wave after the canary: a number, or a share of them (25%).",
        ),
        click.option(
            "--max-fail",
            type=click.FloatRange(0, 100),
            default=0.0,
            show_default=True,
            metavar="PCT",
            help="Stop the rollout once more than PCT% of one wave's hosts failed; the "
            "later waves are untouched.",
        ),
        opt.reboot_timeout_option,
        click.option("-y", "--yes", is_flag=True, help="Start without asking."),
        opt.no_tui_option,
    ]
    for decorate in reversed(decorators):
        fn = decorate(fn)
    return fn


@click.command("upgrade")
@opt.inventory_argument
@opt.limit_option
@opt.forks_option
@rollout_options
@opt.become_pass_option
def upgrade(inventory: str, limit: str | None, forks: int | None, canary: int, wave_size: str,
            max_fail: float, reboot_timeout: float | None, yes: bool, no_tui: bool,
            ask_become_pass: bool) -> None:  # fmt: skip
    """Upgrade hosts to the inventory's stack in waves: a canary first, then waves of
    --wave-size; each host's Slurm node (its `slurm` setting) is drained and its jobs waited
    for, the host converged and smoke-tested, its slurmd restarted once the driver is loaded,
    the node verified (doctor, its GPUs in Slurm's gres) and resumed. A failed host stays
    drained with the reason (`sinfo -R`). docs/upgrade.md is the recipe.

    Exit status: 0 every host resumed; 2 a host failed (the later waves untouched); 4 bad
    input; 5 usage.
    """
    inv, hosts = load_selected(inventory, limit)
    _rollout(inventory, inv.identity, hosts, dict(inv.hosts), forks, canary, wave_size,
             max_fail, reboot_timeout, yes, ask_become_pass, "upgrade", _target,
             tui=not no_tui)  # fmt: skip


@click.command("rollback")
@click.argument("run")
@opt.limit_option
@opt.forks_option
@rollout_options
@opt.become_pass_option
def rollback(run: str, limit: str | None, forks: int | None, canary: int, wave_size: str,
             max_fail: float, reboot_timeout: float | None, yes: bool, no_tui: bool,
             ask_become_pass: bool) -> None:  # fmt: skip
    """Return the hosts an upgrade RUN changed to the driver release, cuDNN and NCCL
    versions (and their holds) its record kept from before it, through the same rolling
    path. The rest of the stack is the inventory's.

    Exit status: 0 every host resumed; 2 a host failed; 4 bad input (no such run, not an
    upgrade's); 5 usage.
    """
    from gpunode import records
    from gpunode.rollout.before import Before

    path = records.find_run(run)
    data = records.load_run(path) if path is not None else None
    if data is None or data.get("command") not in ("upgrade", "rollback"):
        click.echo(f"error: {run!r} is not the id of an upgrade's run record here: "
                   "`gpunode report` lists the runs", err=True)  # fmt: skip
        sys.exit(ExitCode.BAD_INPUT)
    inventory = str(data["inventory"])
    inv, hosts = load_selected(inventory, limit)
    pinned: list[Host] = []
    for h in hosts:
        kept = (data.get("hosts") or {}).get(h.name) or {}
        before = Before.from_json(kept["before"]) if kept.get("before") else None
        if before is None or before.driver is None or h.stack.driver is None:
            click.echo(f"{h.name}: left alone: run {data['id']} kept no driver release from "
                       "before it (untouched, or no driver then)", err=True)  # fmt: skip
            continue
        pinned.append(_pin(h, before))
    if not pinned:
        click.echo(f"error: no host of run {data['id']} to return", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    _rollout(inventory, inv.identity, pinned, dict(inv.hosts), forks, canary, wave_size,
             max_fail, reboot_timeout, yes, ask_become_pass, "rollback", _target,
             extra={"rollback_of": data["id"]}, tui=not no_tui)  # fmt: skip


def _pin(h: Host, before: Before) -> Host:
    """The host with its driver at the recorded release (its branch), and cuDNN and NCCL
    (where the inventory manages them) at their recorded exact versions, held as they were."""
    assert h.stack.driver is not None and before.driver is not None
    update: dict[str, Any] = {
        "driver": h.stack.driver.model_copy(
            update={
                "version": before.driver,
                "branch": before.driver.split(".")[0],
                "update": "keep",
                "hold": before.driver_held,
            }
        )
    }
    for name in ("cudnn", "nccl"):
        spec = getattr(h.stack, name)
        kept = before.library(name)
        if spec is not None and kept is not None:
            version, held = kept
            update[name] = spec.model_copy(
                update={"version": version, "update": "keep", "hold": held}
            )
    return h.model_copy(update={"stack": h.stack.model_copy(update=update)})


def _target(h: Host) -> str:
    d = h.stack.driver
    if d is None:
        return "the inventory's stack"
    if d.version:
        return d.version
    return f"branch {d.branch}" + (" (latest)" if d.update == "latest" else "")


def _rollout(inventory: str, identity: InventoryId, hosts: list[Host], every: dict[str, Host],
             forks: int | None, canary: int, wave_size: str, max_fail: float,
             reboot_timeout: float | None, yes: bool, ask_become_pass: bool, command: str,
             target: Callable[[Host], str],
             extra: dict[str, Any] | None = None, tui: bool = True) -> None:  # fmt: skip
    from gpunode import records
    from gpunode.events import Bus
    from gpunode.execute.host import Options
    from gpunode.resolve.index import RepoVersions
    from gpunode.roles import search_path
    from gpunode.rollout.runner import Plan, Rollout
    from gpunode.rollout.waves import WaveSize, WaveSizeError, waves
    from gpunode.views.plain import PlainPrinter
    from gpunode.views.rollout import RolloutPrinter, summary

    try:
        size = WaveSize.parse(wave_size)
    except WaveSizeError as exc:
        raise click.UsageError(str(exc)) from None
    groups = waves(hosts, canary, size)
    problem = _slurm_problem(hosts, every)
    if problem:
        click.echo(f"error: {inventory}: {problem}", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    shape = " | ".join(", ".join(h.name for h in w) for w in groups)
    if not yes:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            click.echo(f"error: not a terminal, so {command} cannot ask: pass --yes", err=True)
            sys.exit(ExitCode.USAGE)
        if not click.confirm(f"{command} {len(hosts)} host(s) in waves: {shape}?", err=True):
            click.echo("nothing was changed", err=True)
            sys.exit(ExitCode.OK)
    password = become_password(hosts, ask_become_pass)
    opts = Options(search=search_path(inventory), smoke=True, versions=RepoVersions(),
                   reboot_timeout=reboot_timeout, inventory=inventory)  # fmt: skip
    record = records.Record(command, identity, {
        "canary": canary, "wave_size": wave_size, "max_fail": max_fail, "forks": forks,
        "reboot_timeout": reboot_timeout, **(extra or {}),
    })  # fmt: skip
    bus = Bus()  # the rollout's events and each wave's apply's, for one view
    tui = tui and sys.stdin.isatty() and sys.stdout.isatty()
    if not tui:
        bus.subscribe(RolloutPrinter(sys.stdout))
        bus.subscribe(PlainPrinter(sys.stdout, verbose=False, diff=False))
    plan = Plan(groups, opts, canary=canary > 0 and len(groups) > 1, views=[bus.emit],
                max_fail=max_fail, forks=forks, become_password=password, inventory=identity,
                target=target)  # fmt: skip
    rollout = Rollout(plan, _schedulers(every, password), bus, record)
    path = record.save()
    try:
        ends = _in_tui(rollout, bus, hosts, command, inventory) if tui else rollout.run()
    except KeyboardInterrupt:
        record.finish(record.data["hosts"], int(ExitCode.INTERRUPTED), round(_elapsed(record), 3),
                      status="interrupted")  # fmt: skip
        click.echo(f"gpunode: {command} interrupted: the current wave's nodes may be left "
                   f"drained (sinfo -R); its record: {path}", err=True)  # fmt: skip
        raise
    failed = [h.name for h in hosts if h.name not in ends or ends[h.name].phase != "resumed"]
    code = ExitCode.FAILED if failed else ExitCode.OK
    record.finish(record.data["hosts"], int(code), round(_elapsed(record), 3),
                  status="stopped" if rollout.stopped else "finished")  # fmt: skip
    click.echo(summary({h: (e.phase, e.detail) for h, e in ends.items()}, str(path)))
    if rollout.stopped:
        click.echo(f"gpunode: the rollout stopped: {rollout.stopped}", err=True)
    sys.exit(code)


def _in_tui(rollout: Any, bus: Any, hosts: list[Host], command: str,
            inventory: str) -> Any:  # fmt: skip
    """The rollout in the run view (each host's phase in its row, the apply's steps as
    ever); quitting while it goes on stops it as Ctrl-C does, and waits for the wave."""
    import threading

    from gpunode.cli.common import inventory_name
    from gpunode.tui import run_tui

    work = threading.Thread(target=rollout.run, daemon=True)
    fleet = inventory_name(inventory)
    run_tui(bus, hosts=[h.name for h in hosts], work=work.start,
            title=f"gpunode {command} · {fleet}", fleet=fleet)  # fmt: skip
    if work.is_alive():
        rollout.request_stop("quit from the terminal UI", ExitCode.INTERRUPTED)
        click.echo(f"gpunode: stopping the {command}: no new wave starts; waiting for the "
                   "wave under way (its nodes stay drained)", err=True)  # fmt: skip
        work.join()
    return rollout.ends


def _elapsed(record: Any) -> float:
    import time

    return time.time() - float(record.data["started"])


def _slurm_problem(hosts: list[Host], every: dict[str, Host]) -> str | None:
    for h in hosts:
        s = h.slurm
        if s is not None and s.controller != "local" and s.controller not in every:
            return (f"host {h.name}: slurm.controller {s.controller!r} is neither `local` nor "
                    "a host of this inventory")  # fmt: skip
    return None


def _schedulers(
    every: dict[str, Host], password: Any
) -> Callable[[Host], tuple[Scheduler, str] | None]:
    """Each host's Slurm (one per controller and slurm.conf, opened when first asked)."""
    import threading

    from gpunode.scheduler.slurm import Slurm, local_runner, transport_runner
    from gpunode.transport.connect import open_transport

    made: dict[tuple[str, str | None], Slurm] = {}
    lock = threading.Lock()

    def get(h: Host) -> tuple[Scheduler, str] | None:
        s = h.slurm
        if s is None:
            return None
        key = (s.controller, s.conf)
        with lock:
            if key not in made:
                if s.controller == "local":
                    made[key] = Slurm(local_runner(s.conf))
                else:
                    t = open_transport(every[s.controller], become_password=password)
                    made[key] = Slurm(transport_runner(t, s.conf))
        return made[key], s.node or h.name

    return get
