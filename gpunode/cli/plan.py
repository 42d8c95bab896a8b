"""`gpunode plan`: what apply would change on each host, with reasons and exact commands."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from gpunode.cli.common import become_password, load_selected
from gpunode.cli.options import (
    allow_change_held_option,
    become_pass_option,
    forks_option,
    inventory_argument,
    json_option,
    limit_option,
    tags_option,
)
from gpunode.exitcodes import ExitCode


@click.command("plan")
@inventory_argument
@limit_option
@json_option
@tags_option
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 3 when changes are pending and no host failed (0: nothing to do).",
)
@forks_option
@become_pass_option
@allow_change_held_option
def plan(
    inventory: str,
    limit: str | None,
    as_json: bool,
    tags: tuple[str, ...],
    detailed_exitcode: bool,
    forks: int | None,
    ask_become_pass: bool,
    allow_change_held: bool,
) -> None:
    """Read every host (one round trip each) and show what `apply` would change.

    Exit status: 0 nothing to do (or changes pending without --detailed-exitcode),
    2 a host refused or failed, 4 a host unreachable, 5 a host's key changed (or is
    revoked), 3 changes pending with --detailed-exitcode. Several: 5 > 2 > 4.
    """
    from gpunode.execute.host import Options
    from gpunode.execute.preview import plan_hosts
    from gpunode.resolve.index import RepoVersions
    from gpunode.roles import search_path
    from gpunode.views.planview import plan_text

    _, hosts = load_selected(inventory, limit)
    password = become_password(hosts, ask_become_pass)
    opts = Options(
        tags=tags,
        search=search_path(inventory),
        versions=RepoVersions(),
        allow_change_held=allow_change_held,
    )
    outcomes = plan_hosts(hosts, opts, forks=forks, become_password=password)
    refused: list[str] = []
    unreachable: list[str] = []
    hostkey: list[str] = []
    pending = False
    doc: dict[str, Any] = {}
    for name, o in outcomes.items():
        p = o.value
        if p is None:
            if o.hostkey_changed:
                hostkey.append(name)
            else:
                (unreachable if o.status == "unreachable" else refused).append(name)
            doc[name] = {"status": o.state, "error": o.error}
            if not as_json:
                click.echo(f"{name}: {o.summary}")
            continue
        if p.refused is not None:
            refused.append(name)
        pending = pending or bool(p.changes)
        doc[name] = {"status": "refused" if p.refused else "ok", **p.to_json()}
        if not as_json:
            click.echo(plan_text(p))
    if as_json:
        click.echo(json.dumps({"hosts": doc}, indent=2))
    else:
        click.echo(_summary(doc, refused, unreachable, hostkey), err=True)
    if hostkey:
        sys.exit(ExitCode.HOSTKEY)
    if refused:
        sys.exit(ExitCode.FAILED)
    if unreachable:
        sys.exit(ExitCode.UNREACHABLE)
    sys.exit(ExitCode.PENDING if pending and detailed_exitcode else ExitCode.OK)


def _summary(
    doc: dict[str, Any], refused: list[str], unreachable: list[str], hostkey: list[str]
) -> str:
    n = sum(len(v.get("changes", [])) for v in doc.values())
    planned = len(doc) - len(refused) - len(unreachable) - len(hostkey)
    parts = [f"{n} change{'s' * (n != 1)} pending on {planned} host{'s' * (planned != 1)}"]
    if hostkey:
        k, names = len(hostkey), ", ".join(hostkey)
        parts.append(f"host key changed on {k} host{'s' * (k != 1)}: refused ({names})")
    if refused:
        parts.append(f"{len(refused)} refused or failed ({', '.join(refused)})")
    if unreachable:
        parts.append(f"{len(unreachable)} unreachable ({', '.join(unreachable)})")
    return "; ".join(parts)
