"""`gpunode apply`: converge hosts to the inventory, in parallel, and record the run.

Ctrl-C, SIGTERM, a closed stdout and the TUI's quit stop the run the same way: no new
change or host starts, each host's running command finishes (a second Ctrl-C or SIGTERM
closes the connections), and the record, the recap and `--json`'s stream are finished
("interrupted"). docs/reliability.md says what each host is left at.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from gpunode.cli import options as opt
from gpunode.cli.common import (
    become_password,
    can_confirm,
    check_tags,
    inventory_name,
    load_selected,
)
from gpunode.cli.display import confirm, show
from gpunode.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpunode.execute.session import ApplySession
    from gpunode.plan.saved import SavedPlan

SIGNALS = {
    signal.SIGINT: ("interrupted (Ctrl-C)", ExitCode.INTERRUPTED),
    signal.SIGTERM: ("terminated (SIGTERM)", ExitCode.TERMINATED),
}


@contextmanager
def stopping(session: ApplySession) -> Iterator[None]:
    """While the run goes on: the first SIGINT/SIGTERM stops it, a second one cuts it, and a
    closed stdout stops it (stdout then goes to /dev/null, so nothing more fails on it)."""

    def on_signal(signum: int, frame: Any) -> None:
        if session.stop.requested:
            session.cut()
        else:
            reason, code = SIGNALS[signal.Signals(signum)]
            session.request_stop(reason, code)

    def on_closed() -> None:
        stdout_to_null()
        session.request_stop("stdout was closed (broken pipe)", ExitCode.PIPE_CLOSED)

    old = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    session.bus.on_closed = on_closed
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def stdout_to_null() -> None:
    """Point stdout at /dev/null once its reader is gone: later writes cannot fail."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass  # stdout has no descriptor: nothing more is written to it anyway


@click.command("apply")
@opt.inventory_argument
@opt.limit_option
@opt.json_option
@opt.tags_option
@opt.forks_option
@opt.apply_options
@opt.verbose_option
@opt.become_pass_option
@opt.allow_change_held_option
def apply(inventory: str, limit: str | None, as_json: bool, tags: tuple[str, ...],
          skip_tags: tuple[str, ...], forks: int | None, serial: int | None,
          max_fail: float | None, check: bool, diff: bool, detailed_exitcode: bool,
          reboot_timeout: float | None, no_reboot: bool, allow_busy: bool, yes: bool,
          show_commands: bool, no_tui: bool, no_smoke: bool, verbose: int, ask_become_pass: bool,
          allow_change_held: bool) -> None:  # fmt: skip
    """Converge each host to its declared stack, then run its smoke tests.

    Exit status: as `gpunode --help` lists; when hosts end differently, 6 > 2 > 3 > 11 > 4
    > 8 > 7 (7: --check --detailed-exitcode and a host would change; 8: --no-reboot; 11:
    another apply holds the inventory here, or a host).
    """
    from gpunode import records
    from gpunode.execute.host import Options
    from gpunode.execute.session import ApplySession, Pacing
    from gpunode.resolve.index import RepoVersions
    from gpunode.roles import search_path
    from gpunode.views import recap

    if detailed_exitcode and not check:
        raise click.UsageError("--detailed-exitcode needs --check")
    saved_from = inventory
    saved = _saved_plan(inventory, limit, tags, skip_tags, allow_busy, allow_change_held)
    if saved is not None:  # `apply FILE`: the saved plan's inventory, selection and options
        inventory, limit = saved.inventory, saved.limit
        tags, skip_tags = tuple(saved.options["tags"]), tuple(saved.options["skip_tags"])
        allow_busy = bool(saved.options["allow_busy"])
        allow_change_held = bool(saved.options["allow_change_held"])
        yes = True  # it was reviewed when it was saved; it binds each host to it
    inv, hosts = load_selected(inventory, limit)
    check_tags(hosts, inventory, tags, skip_tags)
    if verbose >= 2:
        from gpunode.cli.config import echo_settings

        echo_settings(inventory)
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    can_confirm(yes, check, as_json, tty)
    password = become_password(hosts, ask_become_pass)
    opts = Options(check=check, diff=diff, tags=tags, skip_tags=skip_tags,
                   search=search_path(inventory),
                   smoke=not no_smoke, versions=RepoVersions(),
                   reboot_timeout=reboot_timeout, no_reboot=no_reboot,
                   allow_busy=allow_busy, allow_change_held=allow_change_held,
                   inventory=inventory)  # fmt: skip
    if saved is not None:
        opts.confirmed, opts.saved_plan = saved.hosts, saved_from
    session = ApplySession(hosts, opts, pacing=Pacing(forks, serial, max_fail),
                           become_password=password)  # fmt: skip
    if not check:  # a second apply of this inventory here refuses at once
        from gpunode.execute.inventorylock import InventoryLocked

        try:
            session.lock_inventory(inventory)
        except InventoryLocked as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(ExitCode.LOCKED)
    if not (yes or check) and not confirm(session, show_commands=show_commands):
        click.echo("nothing was changed", err=True)
        sys.exit(ExitCode.OK)
    for old in records.settle_abandoned():
        click.echo(f"gpunode: warning: run {old['id']} was abandoned ({old['abandoned']}): "
                   "its hosts may have been left mid-change; this run converges them",
                   err=True)  # fmt: skip
    record = session.open_record(inv.identity, limit)
    with stopping(session):
        code = show(session, as_json=as_json, tui=tty and not no_tui, verbose=verbose > 0,
                    diff=diff, fleet=inventory_name(inventory))  # fmt: skip
        if session.wait(0) is None and not session.stop.requested:
            # the TUI quit (`q`, Ctrl-Q) with the run going on: stop it as Ctrl-C would
            session.request_stop("quit from the terminal UI", ExitCode.INTERRUPTED)
        if session.stop.requested and session.wait(0) is None:
            click.echo("gpunode: stopping: no new change or host starts; waiting for each "
                       "host's running command to finish (Ctrl-C again cuts them)",
                       err=True)  # fmt: skip
            session.await_stop()
        run = session.finish(timeout=0 if session.stop.was_cut else 30)
    if run is None:
        click.echo(f"the run was left unfinished (exit {code or 1}); its record: {record}",
                   err=True)  # fmt: skip
        sys.exit(code or ExitCode.ERROR)
    code = session.exit_code(run, detailed=detailed_exitcode)
    payload = recap.recap_json(run, str(record), code) if as_json else recap.recap_text(run)
    try:
        click.echo(payload)
    except BrokenPipeError:  # closed after the last event: the run is recorded all the same
        stdout_to_null()
        code = code or ExitCode.PIPE_CLOSED
    if session.stop.requested:
        click.echo(f"gpunode: the run stopped: {session.stop.reason}; the recap and the run "
                   f"record {record} say where each host was left (apply again to finish)",
                   err=True)  # fmt: skip
    if not as_json:
        click.echo(f"run record: {record}", err=True)
    sys.exit(code)


def _saved_plan(path: str, limit: str | None, tags: tuple[str, ...], skip_tags: tuple[str, ...],
                allow_busy: bool, allow_change_held: bool) -> SavedPlan | None:  # fmt: skip
    """The saved plan `path` is (`plan --out`), or None for an inventory; bad input exits 4."""
    from gpunode.plan.saved import SavedPlanError, is_saved_plan, load

    if not is_saved_plan(path):
        return None
    if limit or tags or skip_tags or allow_busy or allow_change_held:
        raise click.UsageError(
            "a saved plan carries its own --limit, --tags, --skip-tags, --allow-busy and"
            " --allow-change-held: plan again with them (plan --out)"
        )
    try:
        return load(path)
    except SavedPlanError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitCode.BAD_INPUT)
