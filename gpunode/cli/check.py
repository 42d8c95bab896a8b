"""`gpunode check`: validate an inventory and every host's stack; touch no host."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

import click

from gpunode.cli.common import load_selected
from gpunode.cli.options import inventory_argument, json_option, limit_option
from gpunode.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpunode.inventory.loader import Inventory


@click.command()
@inventory_argument
@limit_option
@json_option
def check(inventory: str, limit: str | None, as_json: bool) -> None:
    """Validate INVENTORY: strict YAML, the inventory's shape, and whether each host's
    stack can work at all (driver vs CUDA, cuDNN/NCCL builds, PyTorch releases and the
    Python their wheels need, open kernel modules, known GPU models), and whether the
    SSH key files named exist on this machine. Every problem is reported at once with
    file:line:column.

    Every role the hosts' stacks select must exist, and each of its tasks must fit its
    operation's arguments (values written as Jinja are checked once facts render them).

    Exit codes: 0 valid, 4 problems found.
    """
    from gpunode.inventory.text import printable
    from gpunode.roles import search_path
    from gpunode.roles.lint import role_problems, shadow_warnings
    from gpunode.roles.walk import builtin_roles

    inv, hosts = _load_json(inventory, limit) if as_json else load_selected(inventory, limit)
    problems = _findings(inv, hosts)
    replace = {r for h in hosts for r in h.stack.replace_builtin_roles}
    search = search_path(inventory)
    roles = role_problems((r for h in hosts for r in builtin_roles(h)), search, replace)
    for warning in shadow_warnings(search, replace):  # on stderr, --json or not
        click.echo(printable(f"warning: {warning}"), err=True)
    if as_json:
        where_of = (p.rsplit(": ", 1) if ": " in p else ("", p) for p in roles)
        problems += [{"where": w, "field": "role", "message": m, "hosts": []} for w, m in where_of]
        _echo_json(inventory, problems, hosts=[h.name for h in hosts], groups=len(inv.groups))
        sys.exit(ExitCode.BAD_INPUT if problems else ExitCode.OK)
    for p in problems:
        names = p["hosts"]
        who = names[0] if len(names) == 1 else f"{len(names)} hosts ({', '.join(names)})"
        click.echo(
            printable(f"error: {p['where']}: {p['field']}: {p['message']} [{who}]"), err=True
        )
    for problem in roles:
        click.echo(printable(f"error: {problem}"), err=True)
    if problems or roles:
        n = len(problems) + len(roles)
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


def _findings(inv: Inventory, hosts: list[Any]) -> list[dict[str, Any]]:
    """Each host's stack findings, and what its settings need on this machine; the same
    finding set by `defaults` applies to many hosts: one problem, naming them all."""
    from gpunode.compat import check_host
    from gpunode.inventory.controller import controller_problems
    from gpunode.inventory.errors import field_path

    seen: dict[tuple[str, str, str], list[str]] = {}
    for host in hosts:
        found = [(f.loc, f.message) for f in check_host(host)]
        for loc, message in found + controller_problems(host, inv.path.parent):
            key = (str(inv.where(host.name, loc)), field_path(loc), message)
            seen.setdefault(key, []).append(host.name)
    return [
        {"where": where, "field": field, "message": message, "hosts": names}
        for (where, field, message), names in seen.items()
    ]


def _load_json(path: str, limit: str | None) -> tuple[Inventory, list[Any]]:
    """The inventory and its selected hosts; an inventory that does not load is the
    `check` document of its problems (bad input)."""
    from gpunode.inventory import InventoryError, PatternError, load

    try:
        inv = load(path)
        return inv, inv.select(limit)
    except InventoryError as exc:
        problems = [
            {"where": str(p.position), "field": p.field, "message": p.message, "hosts": []}
            for p in exc.problems
        ]
    except PatternError as exc:
        problems = [{"where": "--limit", "field": "", "message": str(exc), "hosts": []}]
    _echo_json(path, problems, hosts=[], groups=0)
    sys.exit(ExitCode.BAD_INPUT)


def _echo_json(path: str, problems: list[dict[str, Any]], *, hosts: list[str], groups: int) -> None:
    from gpunode.views.envelope import dumps

    doc = {"inventory": path, "ok": not problems, "hosts": hosts, "groups": groups,
           "problems": [fields(p) for p in problems]}  # fmt: skip
    click.echo(dumps("check", doc))


_WHERE = re.compile(r"(?P<file>.+?):(?P<line>\d+)(?::(?P<column>\d+))?")
_KEY = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_FIX = re.compile(
    r": (?=(?:use|write|set|add|fix|remove|rename|quote|put|install|drop|replace|declare|give|"
    r"run|create|end|choose|pass|move|close|indent|enrol|name|list)\b)"
)


def fields(problem: dict[str, Any]) -> dict[str, Any]:
    """A problem as fields a script reads without parsing text: `file`, `line`, `column`
    (null where not known), `key_path` (["stack", "cuda", "toolkits", 0]) and the `fix` the
    message ends with (null when it names none), beside `where`, `field` and `message`."""
    where = _WHERE.fullmatch(problem["where"])
    key_path: list[str | int] = [
        int(index) if index else key for key, index in _KEY.findall(problem["field"] or "")
    ]
    said = _FIX.split(problem["message"], maxsplit=1)
    return {
        **problem,
        "file": where.group("file") if where else None,
        "line": int(where.group("line")) if where else None,
        "column": int(where.group("column")) if where and where.group("column") else None,
        "key_path": key_path,
        "fix": said[1] if len(said) == 2 else None,
    }
