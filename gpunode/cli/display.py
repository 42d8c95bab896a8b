"""How `gpunode apply` shows its session: the terminal UI, JSON lines or plain text, and the
confirmation before it changes anything."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from gpunode.execute.session import ApplySession


def show(session: ApplySession, *, as_json: bool, tui: bool, verbose: bool, diff: bool,
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


def confirm(session: ApplySession, *, show_commands: bool = False) -> bool:
    """Read and plan every host, show the summary (every plan in full with
    `show_commands`), ask."""
    from gpunode.views.planview import confirm_text

    outcomes = session.preview()
    text, pending = confirm_text(outcomes, show_commands=show_commands)
    click.echo(text)
    if not click.confirm(f"apply {pending} change(s)?", default=False, err=True):
        return False
    # what was confirmed binds: a host whose plan grows since is stopped before it changes
    # (a host not read then had no plan shown: any change it plans now was not confirmed)
    session.options.confirmed = {
        name: o.value.fingerprint() if o.value is not None else () for name, o in outcomes.items()
    }
    return True
