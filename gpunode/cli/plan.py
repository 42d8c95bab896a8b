"""`gpunode plan`: what apply would change on each host, with reasons and exact commands."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from gpunode.cli.common import (
    become_password,
    inventory_argument,
    json_option,
    limit_option,
    load_selected,
)

if TYPE_CHECKING:
    from gpunode.inventory.model import Host
    from gpunode.plan.change import HostPlan
    from gpunode.transport.base import Transport


@click.command("plan")
@inventory_argument
@limit_option
@json_option
@click.option("--tags", metavar="TAGS", help="Only changes of these roles/tags (comma-separated).")
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 3 when changes are pending and no host failed (0: nothing to do).",
)
@click.option(
    "-f",
    "--forks",
    type=click.IntRange(1, 256),
    default=None,
    help="Hosts to read at once (default: all, up to 50).",
)
@click.option(
    "-K",
    "--ask-become-pass",
    is_flag=True,
    help="Prompt once for the sudo password (else become_password_env).",
)
def plan(
    inventory: str,
    limit: str | None,
    as_json: bool,
    tags: str | None,
    detailed_exitcode: bool,
    forks: int | None,
    ask_become_pass: bool,
) -> None:
    """Read every host (one round trip each) and show what `apply` would change.

    Exit status: 0 nothing to do (or changes pending without --detailed-exitcode),
    2 a host refused or failed, 4 a host unreachable, 5 a host's key changed (or is
    revoked), 3 changes pending with --detailed-exitcode. Several: 5 > 2 > 4.
    """
    from gpunode.events import Bus
    from gpunode.execute.host import HostRun, Options
    from gpunode.execute.result import (
        EXIT_FAILED,
        EXIT_HOSTKEY,
        EXIT_PENDING,
        EXIT_UNREACHABLE,
    )
    from gpunode.hostpool import run_hosts
    from gpunode.resolve.index import RepoVersions
    from gpunode.roles import search_path
    from gpunode.transport.connect import take_become_passwords
    from gpunode.views.planview import plan_text

    _, hosts = load_selected(inventory, limit)
    take_become_passwords(hosts)  # out of the environment before any child process starts
    password = become_password(hosts, ask_become_pass)
    opts = Options(tags=_tags(tags), search=search_path(inventory), versions=RepoVersions())
    bus = Bus()

    def work(transport: Transport, host: Host) -> HostPlan:
        return HostRun(transport, host, bus, opts).read()[1]

    outcomes = run_hosts(
        hosts, work, bus=bus, forks=forks or min(max(len(hosts), 1), 50), become_password=password
    )
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
        sys.exit(EXIT_HOSTKEY)
    if refused:
        sys.exit(EXIT_FAILED)
    if unreachable:
        sys.exit(EXIT_UNREACHABLE)
    sys.exit(EXIT_PENDING if pending and detailed_exitcode else 0)


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


def _tags(text: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in (text or "").split(",") if t.strip())
