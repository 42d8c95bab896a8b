"""Options and error handling shared by subcommands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2


def inventory_argument(fn: F) -> F:
    return click.argument(
        "inventory", type=click.Path(dir_okay=False, path_type=str), metavar="INVENTORY"
    )(fn)


def limit_option(fn: F) -> F:
    return click.option(
        "-l",
        "--limit",
        metavar="PATTERN",
        help="Hosts to act on: names, groups, globs, '!exclude', '&intersect', comma-separated.",
    )(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(fn)


def load_selected(path: str, limit: str | None) -> tuple[Any, list[Any]]:
    """Load and check an inventory, select hosts; on bad input print every problem, exit 2."""
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
        sys.exit(EXIT_BAD_INPUT)
    except PatternError as exc:
        click.echo(f"error: {printable(str(exc))}", err=True)
        sys.exit(EXIT_BAD_INPUT)


def become_password(hosts: list[Any], ask: bool) -> Any:
    """The -K password (prompted now) or None; a sudo password that cannot be used (a line
    break, a control character) ends the command before any host is contacted, exit 2."""
    from gpunode.transport.connect import password_problem, take_become_passwords
    from gpunode.transport.secret import Secret

    take_become_passwords(hosts)
    password = None
    if ask:
        password = Secret(click.prompt("sudo password", hide_input=True, err=True))
    problem = password_problem(hosts, password)
    if problem is not None:
        click.echo(f"error: {problem}; nothing was contacted", err=True)
        sys.exit(EXIT_BAD_INPUT)
    return password
