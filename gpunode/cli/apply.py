"""`gpunode apply`: converge hosts to the inventory, in parallel, and record the run."""

from __future__ import annotations

import sys

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
          no_tui: bool, no_smoke: bool, verbose: int, ask_become_pass: bool,
          allow_change_held: bool) -> None:  # fmt: skip
    """Converge each host to its declared stack, then run its smoke tests.

    Exit status: as `gpunode --help` lists; when hosts end differently, 6 > 2 > 3 > 11 > 4
    > 8 > 7 (7: --check --detailed-exitcode and a host would change; 8: --no-reboot; 11:
    another apply holds the inventory here, or a host).
    """
    from gpunode.execute.host import Options
    from gpunode.execute.session import ApplySession, Pacing
    from gpunode.resolve.index import RepoVersions
    from gpunode.roles import search_path
    from gpunode.views import recap

    if detailed_exitcode and not check:
        raise click.UsageError("--detailed-exitcode needs --check")
    _, hosts = load_selected(inventory, limit)
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
                   allow_busy=allow_busy, allow_change_held=allow_change_held)  # fmt: skip
    session = ApplySession(hosts, opts, pacing=Pacing(forks, serial, max_fail),
                           become_password=password)  # fmt: skip
    if not check:  # a second apply of this inventory here refuses at once
        from gpunode.execute.inventorylock import InventoryLocked

        try:
            session.lock_inventory(inventory)
        except InventoryLocked as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(ExitCode.LOCKED)
    if not (yes or check) and not confirm(session):
        click.echo("nothing was changed", err=True)
        sys.exit(ExitCode.OK)
    record = session.open_record(inventory, limit)
    code = show(session, as_json=as_json, tui=tty and not no_tui, verbose=verbose > 0,
                 diff=diff, fleet=inventory_name(inventory))  # fmt: skip
    # the view may close a moment before the run hands back its result
    run = session.finish(timeout=0 if code == ExitCode.INTERRUPTED else 30)
    if run is None:
        click.echo(f"the run was left unfinished (exit {code or 1}); its record: {record}",
                   err=True)  # fmt: skip
        sys.exit(code or ExitCode.ERROR)
    click.echo(recap.recap_json(run, str(record)) if as_json else recap.recap_text(run))
    if not as_json:
        click.echo(f"run record: {record}", err=True)
    sys.exit(run.check_exit_code if detailed_exitcode else run.exit_code)
