"""Host patterns for --limit, as Ansible users know them.

`web,db` union; `gpu-*` glob; `a100` a group name; `!gpu-a100-02` exclude;
`&h100` intersect. Separators: comma or colon.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Protocol


class Inventory(Protocol):
    """What a pattern is matched against: host names in order, and groups of them."""

    @property
    def hosts(self) -> Mapping[str, object]: ...

    @property
    def groups(self) -> Mapping[str, list[str]]: ...


class PatternError(ValueError):
    pass


def _match(inv: Inventory, term: str) -> list[str]:
    if term in {"all", "*"}:
        return list(inv.hosts)
    if term in inv.groups:
        return list(inv.groups[term])
    if term in inv.hosts:
        return [term]
    found: list[str] = []
    for group, members in inv.groups.items():
        if fnmatch.fnmatchcase(group, term):
            found.extend(m for m in members if m not in found)
    found.extend(n for n in inv.hosts if fnmatch.fnmatchcase(n, term) and n not in found)
    return found


def select(inv: Inventory, pattern: str | None) -> list[str]:
    """Host names matching `pattern`, in inventory order. Empty pattern means all."""
    if not pattern or not pattern.strip():
        return list(inv.hosts)
    terms = [t.strip() for t in re.split(r"[,:]", pattern) if t.strip()]
    include: list[str] = []
    intersect: list[set[str]] = []
    exclude: set[str] = set()
    for term in terms:
        op, name = (term[0], term[1:]) if term[0] in "!&" else ("", term)
        matched = _match(inv, name)
        if not matched:
            known = ", ".join(sorted([*inv.groups, *inv.hosts])) or "none"
            raise PatternError(f"--limit {term!r} matches no host or group (known: {known})")
        if op == "!":
            exclude.update(matched)
        elif op == "&":
            intersect.append(set(matched))
        else:
            include.extend(m for m in matched if m not in include)
    if not include:
        include = list(inv.hosts)
    chosen = {n for n in include if n not in exclude and all(n in s for s in intersect)}
    return [n for n in inv.hosts if n in chosen]
