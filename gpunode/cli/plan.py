"""`gpunode plan`: what apply would change on each host, with reasons and exact commands."""

from __future__ import annotations

import sys
from typing import Any

import click

from gpunode.cli.common import become_password, check_tags, load_selected
from gpunode.cli.options import (
    allow_busy_option,
    allow_change_held_option,
    become_pass_option,
    forks_option,
    inventory_argument,
    json_option,
    limit_option,
    tags_option,
)
from gpunode.exitcodes import exit_code_for
from gpunode.safetext import printable


@click.command("plan")
@inventory_argument
@limit_option
@json_option
@tags_option
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 7 when changes are pending and no host failed (0: nothing to do).",
)
@click.option(
    "--list-tags", is_flag=True, help="Print the tags each selected role offers; plan nothing."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=str),
    help="Save the plan in FILE (0600): `gpunode apply FILE` then does exactly it, and stops"
    " a host whose plan is no longer the saved one.",
)
@forks_option
@allow_busy_option
@become_pass_option
@allow_change_held_option
def plan(
    inventory: str,
    limit: str | None,
    as_json: bool,
    tags: tuple[str, ...],
    skip_tags: tuple[str, ...],
    detailed_exitcode: bool,
    list_tags: bool,
    forks: int | None,
    allow_busy: bool,
    ask_become_pass: bool,
    allow_change_held: bool,
    out: str | None,
) -> None:
    """Read every host (one round trip each) and show what `apply` would change.

    Exit status: 0 nothing to do (or changes pending without --detailed-exitcode),
    2 a host failed, 3 a host unreachable, 4 a host's stack refused, 6 a host's key
    changed (or is revoked), 7 changes pending with --detailed-exitcode.
    Several: 6 > 2 > 3 > 4 > 7.
    """
    from gpunode.execute.host import Options
    from gpunode.execute.preview import plan_hosts
    from gpunode.resolve.index import RepoVersions
    from gpunode.roles import search_path
    from gpunode.views.envelope import dumps
    from gpunode.views.planview import plan_text

    _, hosts = load_selected(inventory, limit)
    if list_tags:
        _list_tags(hosts, inventory, as_json)
        return
    check_tags(hosts, inventory, tags, skip_tags)
    password = become_password(hosts, ask_become_pass)
    opts = Options(tags=tags, skip_tags=skip_tags, search=search_path(inventory),
                   versions=RepoVersions(), allow_busy=allow_busy,
                   allow_change_held=allow_change_held)  # fmt: skip
    outcomes = plan_hosts(hosts, opts, forks=forks, become_password=password)
    statuses: dict[str, str] = {}
    doc: dict[str, Any] = {}
    for name, o in outcomes.items():
        p = o.value
        if p is None:
            statuses[name] = o.state
            doc[name] = {"status": o.state, "error": o.error}
            if not as_json:
                click.echo(printable(f"{name}: {o.summary}"))
            continue
        statuses[name] = "refused" if p.refused else ("pending" if p.changes else "ok")
        doc[name] = {"status": "refused" if p.refused else "ok", **p.to_json()}
        if not as_json:
            click.echo(plan_text(p))
    if not detailed_exitcode:
        statuses = {n: "ok" if s == "pending" else s for n, s in statuses.items()}
    code = exit_code_for(statuses.values())
    if out:
        from gpunode.plan.saved import save

        options = {"tags": list(tags), "skip_tags": list(skip_tags), "allow_busy": allow_busy,
                   "allow_change_held": allow_change_held}  # fmt: skip
        save(out, inventory, limit, options, {n: o.value for n, o in outcomes.items()})
        click.echo(f"plan saved in {out}: `gpunode apply {out}` applies exactly it", err=True)
    if as_json:
        click.echo(dumps("plan", {"hosts": doc, "exit_code": int(code)}))
    else:
        click.echo(_summary(doc), err=True)
    sys.exit(code)


def _list_tags(hosts: list[Any], inventory: str, as_json: bool) -> None:
    """Each selected role and the tags it offers, one role a line (or JSON)."""
    from gpunode.roles import search_path
    from gpunode.roles.tags import role_tags

    known = role_tags(hosts, search_path(inventory))
    if as_json:
        from gpunode.views.envelope import dumps

        click.echo(dumps("tags", {"roles": {role: list(t) for role, t in known.items()}}))
    for role, tags in [] if as_json else known.items():
        click.echo(f"{role}: {', '.join(tags)}")


def _summary(doc: dict[str, Any]) -> str:
    """One line: changes pending on the hosts that planned, then every host that did not.
    Never "0 changes pending" while some host refused or could not be read."""
    planned = [name for name, d in doc.items() if d["status"] == "ok"]
    n = sum(len(doc[name].get("changes", [])) for name in planned)
    parts = []
    if n or len(planned) == len(doc):
        parts.append(f"{n} change{'s' * (n != 1)} pending on {_hosts(len(planned))}")
    elif planned:
        parts.append(f"nothing to change on {_hosts(len(planned))}")
    for status, template in _NOT_PLANNED:
        names = [name for name, d in doc.items() if d["status"] == status]
        if names:
            parts.append(template.format(hosts=_hosts(len(names)), names=", ".join(names)))
    return "; ".join(parts)


def _hosts(k: int) -> str:
    return f"{k} host{'s' * (k != 1)}"


_NOT_PLANNED = (
    ("hostkey-changed", "host key changed on {hosts}: refused ({names})"),
    ("failed", "{hosts} failed ({names})"),
    ("unreachable", "{hosts} unreachable ({names})"),
    ("refused", "{hosts} refused ({names})"),
)
