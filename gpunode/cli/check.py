"""`gpunode check`: validate an inventory and every host's stack; touch no host."""

from __future__ import annotations

import sys

import click

from gpunode.cli.common import load_selected
from gpunode.cli.options import inventory_argument, limit_option
from gpunode.exitcodes import ExitCode


@click.command()
@inventory_argument
@limit_option
def check(inventory: str, limit: str | None) -> None:
    """Validate INVENTORY: strict YAML, the inventory's shape, and whether each host's
    stack can work at all (driver vs CUDA, cuDNN/NCCL builds, PyTorch wheels, open
    kernel modules). Every problem is reported at once with file:line:column.

    Every role the hosts' stacks select must exist, and each of its tasks must fit its
    operation's arguments (values written as Jinja are checked once facts render them).

    Exit codes: 0 valid, 4 problems found.
    """
    from gpunode.compat import check_host
    from gpunode.inventory.text import printable
    from gpunode.roles import search_path
    from gpunode.roles.lint import role_problems
    from gpunode.roles.walk import builtin_roles

    inv, hosts = load_selected(inventory, limit)
    # The same finding set by `defaults` applies to many hosts: report it once, naming them.
    seen: dict[tuple[str, str], list[str]] = {}
    for host in hosts:
        for finding in check_host(host):
            from gpunode.inventory.errors import field_path

            where = f"{inv.where(host.name, finding.loc)}: {field_path(finding.loc)}"
            key = (where, finding.message)
            seen.setdefault(key, []).append(host.name)
    for (where, message), names in seen.items():
        who = names[0] if len(names) == 1 else f"{len(names)} hosts ({', '.join(names)})"
        click.echo(printable(f"error: {where}: {message} [{who}]"), err=True)
    roles = role_problems((r for h in hosts for r in builtin_roles(h)), search_path(inventory))
    for problem in roles:
        click.echo(printable(f"error: {problem}"), err=True)
    if seen or roles:
        n = len(seen) + len(roles)
        click.echo(
            f"{n} problem{'s' if n != 1 else ''} in {printable(inventory)}; nothing was changed.",
            err=True,
        )
        sys.exit(ExitCode.BAD_INPUT)
    groups = len(inv.groups)
    click.echo(
        f"{printable(inventory)}: ok ({len(hosts)} host{'s' if len(hosts) != 1 else ''}, "
        f"{groups} group{'s' if groups != 1 else ''})"
    )
