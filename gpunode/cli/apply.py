"""`gpunode apply`: converge hosts to the inventory, in parallel, and record the run."""

from __future__ import annotations

import json
import sys
import threading
from typing import TYPE_CHECKING, Any

import click

from gpunode.cli.common import (
    EXIT_ERROR,
    become_password,
    inventory_argument,
    json_option,
    limit_option,
    load_selected,
)
from gpunode.cli.plan import _tags

if TYPE_CHECKING:
    from gpunode.events import Bus
    from gpunode.execute.result import RunResult
    from gpunode.inventory.model import Host
    from gpunode.plan.change import HostPlan
    from gpunode.transport.base import Transport
    from gpunode.transport.secret import Secret


@click.command("apply")
@inventory_argument
@limit_option
@json_option
@click.option("--tags", metavar="TAGS", help="Only changes of these roles/tags (comma-separated).")
@click.option("--check", is_flag=True, help="Read and plan only: no remote writes at all.")
@click.option("--diff", is_flag=True, help="Show the difference in each file changed.")
@click.option(
    "-f",
    "--forks",
    type=click.IntRange(1, 256),
    default=None,
    help="Hosts at once (default: all, up to 50).",
)
@click.option(
    "--serial",
    type=click.IntRange(1),
    default=None,
    help="Converge hosts in batches of N (rolling changes).",
)
@click.option(
    "--max-fail",
    type=click.FloatRange(0, 100),
    default=None,
    metavar="PCT",
    help="Skip later batches once more than PCT% of one batch's hosts failed.",
)
@click.option(
    "--reboot-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a rebooting host may take to come back with a new boot id.",
)
@click.option("-y", "--yes", is_flag=True, help="Apply without asking.")
@click.option("--no-tui", is_flag=True, help="Plain output even in a terminal.")
@click.option("--no-smoke", is_flag=True, help="Skip the smoke tests after converging.")
@click.option("-v", "--verbose", is_flag=True, help="Show the output of every command.")
@click.option(
    "-K",
    "--ask-become-pass",
    is_flag=True,
    help="Prompt once for the sudo password (else become_password_env).",
)
def apply(
    inventory: str,
    limit: str | None,
    as_json: bool,
    tags: str | None,
    check: bool,
    diff: bool,
    forks: int | None,
    serial: int | None,
    max_fail: float | None,
    reboot_timeout: float,
    yes: bool,
    no_tui: bool,
    no_smoke: bool,
    verbose: bool,
    ask_become_pass: bool,
) -> None:
    """Converge each host to its declared stack, then run its smoke tests.

    Exit status: 0 every host converged, 2 a host failed, 4 a host unreachable,
    5 a host's key changed (or is revoked), 1 bad usage (no --yes outside a terminal),
    2 bad inventory.
    """
    from gpunode.events import Bus
    from gpunode.execute import Options
    from gpunode.resolve.index import RepoVersions
    from gpunode.roles import search_path
    from gpunode.transport.connect import take_become_passwords

    _, hosts = load_selected(inventory, limit)
    take_become_passwords(hosts)  # out of the environment before any child process starts
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    if not (yes or check or as_json) and not tty:
        click.echo(
            "error: not a terminal, so apply cannot ask for confirmation: "
            "pass --yes to apply, or --check to see what would change",
            err=True,
        )
        sys.exit(1)
    if as_json and not (yes or check):
        click.echo("error: --json cannot ask for confirmation: add --yes or --check", err=True)
        sys.exit(1)
    password = become_password(hosts, ask_become_pass)
    opts = Options(
        check=check,
        diff=diff,
        tags=_tags(tags),
        search=search_path(inventory),
        smoke=not no_smoke,
        versions=RepoVersions(),
        reboot_timeout=reboot_timeout,
    )
    if not (yes or check) and not _confirm(hosts, opts, password, forks):
        click.echo("nothing was changed", err=True)
        sys.exit(0)

    from gpunode.records import Record

    options = {
        "limit": limit,
        "tags": list(opts.tags),
        "check": check,
        "diff": diff,
        "forks": forks,
        "serial": serial,
        "max_fail": max_fail,
        "reboot_timeout": reboot_timeout,
    }
    record = Record("apply", inventory, options)
    record.data["hosts"] = {h.name: {"status": "waiting"} for h in hosts}
    record.save()
    bus = Bus()
    result: list[RunResult] = []
    done = threading.Event()

    def work() -> None:
        from gpunode.execute import apply as run_apply

        try:
            result.append(
                run_apply(
                    hosts,
                    bus=bus,
                    options=opts,
                    forks=forks,
                    serial=serial,
                    max_fail=max_fail,
                    become_password=password,
                )
            )
        finally:
            done.set()

    def retry(names: list[str]) -> None:
        """The TUI's `r`: run the failed and unreachable hosts again, on the same events."""
        again_hosts = [h for h in hosts if h.name in names]

        def again() -> None:
            from gpunode.execute import apply as run_apply

            rerun = run_apply(again_hosts, bus=bus, options=opts, forks=forks,
                              become_password=password)  # fmt: skip
            if result:
                result[0].hosts.update(rerun.hosts)

        threading.Thread(target=again, name="gpunode-retry", daemon=True).start()

    code = _run_view(
        bus, work, hosts, as_json=as_json, tty=tty and not no_tui, verbose=verbose, diff=diff,
        on_retry=retry,
    )  # fmt: skip
    from gpunode.execute.result import EXIT_INTERRUPTED

    if not result and code != EXIT_INTERRUPTED:
        # the view may close a moment before the run hands back its result
        done.wait(timeout=30)
    if not result:
        if code == 0:
            code = EXIT_ERROR
        click.echo(
            f"the run was left unfinished (exit {code}); its record: {record.path}", err=True
        )
        sys.exit(code)
    run = result[0]
    record.finish({n: r.to_json() for n, r in run.hosts.items()}, run.exit_code, run.seconds)
    _report(run, as_json=as_json, record=str(record.path))
    sys.exit(run.exit_code)


def _run_view(
    bus: Bus,
    work: Any,
    hosts: list[Host],
    *,
    as_json: bool,
    tty: bool,
    verbose: bool,
    diff: bool,
    on_retry: Any = None,
) -> int:
    if as_json:
        from gpunode.views.jsonl import JsonLines

        bus.subscribe(JsonLines(sys.stdout))
    elif tty:
        try:
            from gpunode.tui import run_tui
        except ImportError:
            run_tui = None  # type: ignore[assignment]
        if run_tui is not None:
            return _tui(run_tui, bus, work, hosts, on_retry)
    if not as_json:
        from gpunode.views.plain import PlainPrinter

        bus.subscribe(PlainPrinter(sys.stdout, verbose=verbose, diff=diff))
    work()
    return 0


def _tui(run_tui: Any, bus: Bus, work: Any, hosts: list[Host], on_retry: Any) -> int:
    """The run view, with the GPUs tab fed by the same sampler as `gpunode top`."""
    from gpunode.cli.top import source_for
    from gpunode.monitor import Board, Sampler

    board = Board([h.name for h in hosts], stale_after=5.0)
    sampler = Sampler(board, {h.name: source_for(h, 1.0, use_nvml=False) for h in hosts})
    sampler.start()
    try:
        code: int = run_tui(
            bus, hosts=[h.name for h in hosts], work=work, board=board, on_retry=on_retry
        )
    finally:
        sampler.stop()
    return code


def _report(run: RunResult, *, as_json: bool, record: str) -> None:
    from gpunode.views.recap import recap_rows, recap_text

    if as_json:
        click.echo(
            json.dumps(
                {
                    "event": "Recap",
                    "hosts": recap_rows(run),
                    "exit_code": run.exit_code,
                    "record": record,
                }
            )
        )
    else:
        click.echo(recap_text(run))
        click.echo(f"run record: {record}", err=True)


def _confirm(hosts: list[Host], opts: Any, password: Secret | None, forks: int | None) -> bool:
    """Read and plan every host, show the summary, ask."""
    from gpunode.events import Bus
    from gpunode.execute.host import HostRun
    from gpunode.hostpool import run_hosts
    from gpunode.views.planview import plan_text

    bus = Bus()

    def work(transport: Transport, host: Host) -> HostPlan:
        return HostRun(transport, host, bus, opts).read()[1]

    outcomes = run_hosts(
        hosts, work, bus=bus, forks=forks or min(max(len(hosts), 1), 50), become_password=password
    )
    pending = 0
    for name, o in outcomes.items():
        if o.value is None:
            click.echo(f"{name}: {o.summary}")
        else:
            click.echo(plan_text(o.value, commands=False))
            pending += len(o.value.changes)
    if not pending:
        click.echo("every reachable host is already converged")
    return click.confirm(f"apply {pending} change(s)?", default=False, err=True)
