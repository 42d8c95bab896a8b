"""What subcommands share once their options are parsed: loading the inventory, the sudo
password prompt."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from gpunode.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpunode.inventory.model import Host
    from gpunode.transport.secret import Secret


def load_selected(path: str, limit: str | None) -> tuple[Any, list[Any]]:
    """Load and check an inventory, select hosts; on bad input print every problem, exit 4."""
    from gpunode.inventory import InventoryError, PatternError, load
    from gpunode.inventory.text import printable

    try:
        inv = load(path)
        return inv, inv.select(limit)
    except InventoryError as exc:
        for problem in exc.problems:
            # Messages quote inventory text: escape it, never hand a terminal raw escapes.
            click.echo(f"error: {printable(str(problem))}", err=True)
        n = len(exc.problems)
        click.echo(
            f"{n} problem{'s' if n != 1 else ''} in {printable(path)}; nothing was changed.",
            err=True,
        )
        sys.exit(ExitCode.BAD_INPUT)
    except PatternError as exc:
        click.echo(f"error: {printable(str(exc))}", err=True)
        sys.exit(ExitCode.BAD_INPUT)


def become_password(hosts: list[Host], ask: bool) -> Secret | None:
    """Take every host's become_password_env out of the environment (before any child
    process starts), then prompt once when -K asks for it."""
    from gpunode.transport.connect import take_become_passwords
    from gpunode.transport.secret import Secret

    take_become_passwords(hosts)
    if not ask:
        return None
    return Secret(click.prompt("sudo password", hide_input=True, err=True))
