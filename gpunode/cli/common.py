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
        return inv, [_transport(host) for host in inv.select(limit)]
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


def _transport(host: Host) -> Host:
    """The host, with GPUNODE_SSH_TRANSPORT (or gpunode.toml's ssh_transport) as its
    ssh.transport when its inventory sets none."""
    import os

    wanted = os.environ.get("GPUNODE_SSH_TRANSPORT")
    if not wanted or "transport" in host.ssh.model_fields_set:
        return host
    if wanted not in ("paramiko", "openssh"):
        click.echo(f"error: GPUNODE_SSH_TRANSPORT={wanted!r}: use paramiko or openssh", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    return host.model_copy(update={"ssh": host.ssh.model_copy(update={"transport": wanted})})


def check_tags(hosts: list[Host], inventory: str, *asked: tuple[str, ...]) -> None:
    """Refuse (exit 5) a --tags/--skip-tags name that none of the selected hosts' roles
    offers, listing the ones they do."""
    wanted = [tag for tags in asked for tag in tags]
    if not wanted:
        return  # before the imports: the roles' walk is not needed (execute/warm.py)
    from gpunode.cli.options import did_you_mean
    from gpunode.inventory.text import printable
    from gpunode.roles import search_path
    from gpunode.roles.tags import role_tags, unknown_tags

    known = role_tags(hosts, search_path(inventory))
    unknown = unknown_tags(wanted, known)
    if unknown:
        offered = list(dict.fromkeys(t for tags in known.values() for t in tags))
        hint = "".join(did_you_mean(tag, offered) for tag in unknown[:1])
        click.echo(printable(f"error: unknown tag {', '.join(unknown)}{hint}: the selected hosts' "
                             f"roles offer {', '.join(offered) or 'none'} (plan --list-tags)"),
                   err=True)  # fmt: skip
        sys.exit(ExitCode.USAGE)


def _terminal() -> bool:
    """A controlling terminal to prompt on (getpass reads /dev/tty before stdin)."""
    import os

    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return False
    return True


def become_password(hosts: list[Host], ask: bool) -> Secret | None:
    """The -K password (prompted now) or None; a sudo password that cannot be used (a line
    break, a control character) ends the command before any host is contacted (bad input)."""
    from gpunode.transport.connect import password_problem, take_become_passwords
    from gpunode.transport.secret import Secret

    take_become_passwords(hosts)
    password = None
    if ask and not sys.stdin.isatty() and not _terminal():  # no prompt could be answered
        click.echo("error: -K asks for the sudo password on a terminal, and there is none "
                   "here: run it on a terminal, or put the password in an environment "
                   "variable and name it with become_password_env in the inventory",
                   err=True)  # fmt: skip
        sys.exit(ExitCode.USAGE)
    if ask:
        password = Secret(click.prompt("sudo password", hide_input=True, err=True))
    problem = password_problem(hosts, password)
    if problem is not None:
        click.echo(f"error: {problem}; nothing was contacted", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    return password


def inventory_name(path: str) -> str:
    """The inventory's name, as the GPU view and titles show it: its file's stem."""
    from pathlib import Path

    return Path(path).stem or path


def can_confirm(yes: bool, check: bool, as_json: bool, tty: bool) -> None:
    """apply asks before changing hosts: without --yes (or --check) it needs a terminal and
    no --json, else it ends here with the usage status."""
    if (yes or check) or (tty and not as_json):
        return
    why = ("--json cannot ask for confirmation: add --yes or --check" if as_json
           else "not a terminal, so apply cannot ask for confirmation: "
           "pass --yes to apply, or --check to see what would change")  # fmt: skip
    click.echo(f"error: {why}", err=True)
    sys.exit(ExitCode.USAGE)
