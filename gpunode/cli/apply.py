"""`gpunode apply`: converge hosts to the inventory, in parallel, and record the run."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from gpunode.cli import options as opt
from gpunode.cli.common import become_password, check_tags, inventory_name, load_selected
from gpunode.exitcodes import ExitCode, exit_code_for

if TYPE_CHECKING:
    from gpunode.execute.session import ApplySession


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

    Exit status: 0 every host converged, 2 a host failed, 3 a host unreachable,
    4 bad inventory or a stack refused before any change, 5 bad usage (no --yes outside
    a terminal), 6 a host's key changed (or is revoked), 7 changes pending (--check
    --detailed-exitcode), 8 converged but a reboot pending (--no-reboot), 130 interrupted.
    Several: 6 > 2 > 3 > 4 > 8 > 7.
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
        from gpunode.cli.config import settings_rows, settings_text

        ctx = click.get_current_context()
        for line in settings_text(settings_rows(inventory, ctx)):
            click.echo(f"setting: {line}", err=True)
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    if not (yes or check) and (as_json or not tty):
        why = ("--json cannot ask for confirmation: add --yes or --check" if as_json
               else "not a terminal, so apply cannot ask for confirmation: "
               "pass --yes to apply, or --check to see what would change")  # fmt: skip
        click.echo(f"error: {why}", err=True)
        sys.exit(ExitCode.USAGE)
    password = become_password(hosts, ask_become_pass)
    opts = Options(check=check, diff=diff, tags=tags, skip_tags=skip_tags,
                   search=search_path(inventory),
                   smoke=not no_smoke, versions=RepoVersions(),
                   reboot_timeout=reboot_timeout, no_reboot=no_reboot,
                   allow_busy=allow_busy, allow_change_held=allow_change_held)  # fmt: skip
    session = ApplySession(hosts, opts, pacing=Pacing(forks, serial, max_fail),
                           become_password=password)  # fmt: skip
    if not (yes or check) and not _confirm(session):
        click.echo("nothing was changed", err=True)
        sys.exit(ExitCode.OK)
    record = session.open_record(inventory, limit)
    code = _show(session, as_json=as_json, tui=tty and not no_tui, verbose=verbose > 0,
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
    if detailed_exitcode:  # with --check, a host that would change counts as pending (7)
        sys.exit(exit_code_for("pending" if r.status == "changed" else r.final
                               for r in run.hosts.values()))  # fmt: skip
    sys.exit(run.exit_code)


def _show(session: ApplySession, *, as_json: bool, tui: bool, verbose: bool, diff: bool,
          fleet: str) -> int:  # fmt: skip
    """Run the session under the view asked for; the view's exit status (0 but for the TUI)."""
    if tui and not as_json:
        from gpunode.tui import run_apply_tui

        return run_apply_tui(session, fleet=fleet)
    from gpunode.views.jsonl import JsonLines
    from gpunode.views.plain import PlainPrinter

    session.bus.subscribe(JsonLines(sys.stdout) if as_json else
                          PlainPrinter(sys.stdout, verbose=verbose, diff=diff))  # fmt: skip
    session.run()
    return 0


def _confirm(session: ApplySession) -> bool:
    """Read and plan every host, show the summary, ask."""
    from gpunode.views.planview import confirm_text

    text, pending = confirm_text(session.preview())
    click.echo(text)
    return click.confirm(f"apply {pending} change(s)?", default=False, err=True)
