"""Every GPUNODE_* variable the controller reads, in one table, checked before a command
runs: a value that cannot be used names its variable (exit 5, before any host), and a
GPUNODE_<COMMAND>_<OPTION> that is no option of the command (click would ignore it
silently) is named with the nearest one.

The code that uses a variable reads it where it is used (records, the index cache, the
plain view's heartbeat...); this module is where its name, meaning and shape are said once.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping

import click


def _positive_number(text: str) -> str | None:
    try:
        ok = float(text) > 0
    except ValueError:
        ok = False
    return None if ok else "a number of seconds above 0"


def _one_of(*words: str) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        return None if text in words else " or ".join(words)

    return check


def _flag(text: str) -> str | None:
    return (
        None
        if text.strip().lower() in ("", "0", "1", "true", "false", "yes", "no")
        else ("1 or 0 (true/false, yes/no)")
    )


VARIABLES: dict[str, tuple[str, Callable[[str], str | None] | None]] = {
    "GPUNODE_INVENTORY": ("the INVENTORY of every command that takes one", None),
    "GPUNODE_STATE_DIR": ("where run records are kept", None),
    "GPUNODE_CACHE_DIR": ("where repository indexes and parsed roles are cached", None),
    "GPUNODE_SSH_TRANSPORT": (
        "ssh.transport for hosts whose inventory sets none", _one_of("paramiko", "openssh")
    ),
    "GPUNODE_HEARTBEAT": ("seconds between the plain view's lines for a long change",
                          _positive_number),
    "GPUNODE_ALLOW_SSH_COMMANDS": ("inventories may name ssh configs that run commands",
                                   _flag),
    "GPUNODE_ALLOW_FILE_DIRS": ("folders an inventory's files may come from", None),
}  # fmt: skip
"""Name -> (meaning, check of a value: None when it can be used, else what it must be).
Besides these, click reads GPUNODE_<COMMAND>_<OPTION> for every option of every command."""


def problems(
    name: str, command: click.Command, environ: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """(errors, warnings) for the GPUNODE_* variables set when `gpunode NAME` runs."""
    errors: list[str] = []
    for var, (_, check) in VARIABLES.items():
        value = environ.get(var)
        wrong = check(value) if check is not None and value else None
        if wrong:
            errors.append(f"environment variable {var}={value!r}: it must be {wrong}")
    prefix = f"GPUNODE_{name.upper().replace('-', '_')}_"
    options = _option_vars(prefix, command)
    warnings = []
    for var in sorted(v for v in environ if v.startswith(prefix) and v not in options):
        close = difflib.get_close_matches(var, options, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        warnings.append(f"{var} is no option of gpunode {name}{hint}: it is ignored")
    return errors, warnings


def _option_vars(prefix: str, command: click.Command) -> list[str]:
    """The variables click reads for `command` and, for a group (`mirror`), its
    subcommands' (GPUNODE_MIRROR_SERVE_BIND), so a typo there is named too."""
    names = [f"{prefix}{p.name.upper()}" for p in command.params if p.name]
    if isinstance(command, click.Group):
        for sub_name, sub in command.commands.items():
            names += _option_vars(f"{prefix}{sub_name.upper().replace('-', '_')}_", sub)
    return names


def check(name: str, command: click.Command) -> None:
    """Stop (exit 5) on a variable that cannot be used; warn of one that is ignored."""
    from gpunode.exitcodes import ExitCode

    errors, warnings = problems(name, command, os.environ)
    for line in warnings:
        click.echo(f"warning: {line}", err=True)
    for line in errors:
        click.echo(f"error: {line}", err=True)
    if errors:
        raise click.exceptions.Exit(ExitCode.USAGE)
