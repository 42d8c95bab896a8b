"""Host patterns for --limit, as Ansible users know them.

`web,db` union; `gpu-*` glob; `a100` a group name; `!gpu-a100-02` exclude; `&h100`
intersect; `a100[0]`, `a100[-1]`, `a100[0:2]` (the first two, as Python slices and
Ansible's do), `a100[1:]` a group's hosts by position; `~gpu-a1.*` a regular expression
(matched from the start of a host or group name, as Ansible's); `@retry.txt` the patterns
in a file, one a line (Ansible's retry file). Separators: comma, or colon when the
pattern has no comma.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

SYNTAX = (
    "a host, a group, a glob (gpu-*), ~regex, group[0], group[1:3], @file, "
    "joined by ',' with !exclude and &intersect"
)


class Inventory(Protocol):
    """What a pattern is matched against: host names in order, and groups of them."""

    @property
    def hosts(self) -> Mapping[str, object]: ...

    @property
    def groups(self) -> Mapping[str, list[str]]: ...


class PatternError(ValueError):
    pass


_SUBSCRIPT = re.compile(r"(?P<name>.+?)\[(?P<a>-?\d*)(?::(?P<b>-?\d*))?\]")


def _subscript(inv: Inventory, term: str, m: re.Match[str]) -> list[str]:
    hosts = _match(inv, m.group("name"), term)
    a, b = m.group("a"), m.group("b")
    if b is None:  # one position
        if not a:
            raise PatternError(
                f"--limit {term!r}: an empty subscript; write group[0] or group[0:2]"
            )
        i = int(a)
        if not -len(hosts) <= i < len(hosts):
            raise PatternError(
                f"--limit {term!r}: {m.group('name')} has {len(hosts)} host(s), "
                f"positions 0 to {len(hosts) - 1}"
            )
        return [hosts[i]]
    return hosts[int(a) if a else None : int(b) if b else None]


def _regex(inv: Inventory, term: str) -> list[str]:
    try:
        rx = re.compile(term[1:])
    except re.error as exc:
        raise PatternError(f"--limit {term!r}: not a regular expression: {exc}") from None
    found: list[str] = []
    for group, members in inv.groups.items():
        if rx.match(group):
            found.extend(m for m in members if m not in found)
    found.extend(n for n in inv.hosts if rx.match(n) and n not in found)
    return found


def _match(inv: Inventory, term: str, whole: str | None = None) -> list[str]:
    if term in {"all", "*"}:
        return list(inv.hosts)
    if term in inv.groups:
        return list(inv.groups[term])
    if term in inv.hosts:
        return [term]
    if term.startswith("~"):
        return _regex(inv, term)
    m = _SUBSCRIPT.fullmatch(term)
    if m and whole is None:
        return _subscript(inv, term, m)
    found: list[str] = []
    for group, members in inv.groups.items():
        if fnmatch.fnmatchcase(group, term):
            found.extend(m for m in members if m not in found)
    found.extend(n for n in inv.hosts if fnmatch.fnmatchcase(n, term) and n not in found)
    if not found:
        _unknown(inv, whole or term, term)
    return found


def _unknown(inv: Inventory, whole: str, name: str) -> None:
    known = [*inv.groups, *inv.hosts]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if close:
        hint = f"did you mean {' or '.join(repr(c) for c in close)}?"
    else:
        shown = ", ".join(sorted(known)[:12]) + (", ..." if len(known) > 12 else "")
        hint = f"known: {shown or 'none'}"
    raise PatternError(f"--limit {whole!r} matches no host or group: {hint} (patterns: {SYNTAX})")


def split(pattern: str) -> list[str]:
    """Terms of a pattern: on commas, else on colons outside a subscript (`a[1:2]:b`)."""
    parts = pattern.split(",") if "," in pattern else re.split(r":(?![^\[]*\])", pattern)
    return [t.strip() for t in parts if t.strip()]


def _from_file(term: str) -> list[str]:
    path = Path(term[1:]).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PatternError(f"--limit {term!r}: cannot read {path}: {why}") from None
    lines = [line.strip() for line in text.splitlines()]
    terms = [t for line in lines if line and not line.startswith("#") for t in split(line)]
    if not terms:
        raise PatternError(f"--limit {term!r}: {path} names no host")
    return terms


def select(inv: Inventory, pattern: str | None) -> list[str]:
    """Host names matching `pattern`, in inventory order. Empty pattern means all."""
    if not pattern or not pattern.strip():
        return list(inv.hosts)
    terms: list[str] = []
    for term in split(pattern):
        terms += _from_file(term) if term.startswith("@") else [term]
    include: list[str] = []
    intersect: list[set[str]] = []
    exclude: set[str] = set()
    for term in terms:
        op, name = (term[0], term[1:]) if term[0] in "!&" else ("", term)
        matched = _match(inv, name)
        if not matched:
            raise PatternError(f"--limit {term!r} matches no host (patterns: {SYNTAX})")
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
