"""The tags `--tags` and `--skip-tags` may name: each selected role's name, then the tags
its tasks declare (a change carries its role's name and its task's tags)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from gpunode.inventory.model import Host
from gpunode.roles.loader import RoleError, find_role
from gpunode.roles.walk import builtin_roles


def role_tags(hosts: Iterable[Host], search: tuple[Path, ...]) -> dict[str, tuple[str, ...]]:
    """Role name -> its tags, for every role the hosts' stacks select, in the order first
    met. A role that cannot be loaded offers only its name (`gpunode check` says why)."""
    out: dict[str, tuple[str, ...]] = {}
    for host in hosts:
        for name in builtin_roles(host):
            if name in out:
                continue
            try:
                tasks = find_role(name, search, host.stack.replace_builtin_roles).tasks
            except RoleError:
                tasks = ()
            out[name] = tuple(dict.fromkeys([name, *(t for task in tasks for t in task.tags)]))
    return out


def unknown_tags(asked: Collection[str], known: dict[str, tuple[str, ...]]) -> list[str]:
    """The names in `asked` that no selected role offers, in the order asked."""
    valid = {tag for tags in known.values() for tag in tags}
    return [tag for tag in asked if tag not in valid]


def selected(
    tags: Collection[str], only: Collection[str] | None, skip: Collection[str] | None
) -> bool:
    """Whether a change tagged `tags` is kept: it has one of `only` (when given) and none
    of `skip`."""
    have = set(tags)
    return (not only or bool(have & set(only))) and not (skip and have & set(skip))
