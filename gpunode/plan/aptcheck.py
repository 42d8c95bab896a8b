"""What apt will be asked for, checked against the repository's index before anything runs.

Every `name=version` (or glob) of a plan's `apt-get install` steps must match a version the
index publishes, and the exact-version dependencies (`Depends: x (= v)`) of the version apt
would take, followed through the index, must be there too: a mirror caught mid-sync lists a
metapackage whose module package it has not fetched yet, and apt then gives up with "held
broken packages" after the preferences were rewritten. Packages the index does not carry
at all (Ubuntu's archive) are left to apt's own simulation on the host.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpunode.changes import Change
from gpunode.facts.model import HostFacts
from gpunode.resolve.packages import Catalog
from gpunode.resolve.resolver import IndexUnavailable
from gpunode.roles.ops.apt import version_matches
from gpunode.versions import compare_debian, debian_key

_ALT = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9+.-]*)(?::[a-z0-9]+)?\s*(?:\(\s*(<<|<=|=|>=|>>)\s*([^)\s]+)\s*\))?"
)
SHOWN = 4  # versions named when a pattern matches none


@dataclass(frozen=True)
class Target:
    name: str
    version: str | None  # exact, a glob, or None (any)


def targets(change: Change) -> list[Target]:
    """The packages a change's apt transaction installs (removals, `name-`, left out)."""
    out: list[Target] = []
    for step in change.steps:
        for quoted in step.installs:
            words = shlex.split(quoted)
            if not words or words[0].endswith("-"):
                continue
            name, _, version = words[0].partition("=")
            out.append(Target(name, version or None))
    return out


def loaded(*getters: Callable[[], Catalog] | None) -> list[Catalog]:
    """The indexes the controller can read; one it cannot is left to the host's apt."""
    out: list[Catalog] = []
    for get in getters:
        if get is None:
            continue
        try:
            out.append(get())
        except IndexUnavailable:
            continue
    return out


def unavailable(
    changes: Sequence[Change], catalogs: Sequence[Catalog], facts: HostFacts
) -> str | None:
    """Why apt would refuse a transaction of `changes`, as far as the indexes tell; or None."""
    for change in changes:
        for t in targets(change):
            cat = _catalog_for(catalogs, t.name)
            if cat is None:
                continue
            taken = taken_version(cat, t)
            if taken is None:
                newest = sorted(cat.versions(t.name), key=debian_key)[-SHOWN:]
                return (
                    f"{change.title}: apt would be asked for {t.name}={t.version}, which"
                    f" {cat.where} does not publish (it has {', '.join(newest)})"
                )
            why = _missing_dependency(cat, t.name, taken, facts)
            if not why and (lacking := _not_mirrored(cat, t.name, taken, facts)):
                return f"{change.title}: {lacking}"
            if why:
                asked = f"{t.name}={t.version}" if t.version else t.name
                return (
                    f"{change.title}: apt would be asked for {asked}, and {why}: the"
                    " repository (or its mirror) lacks a package of this release, perhaps"
                    " mid-sync; wait for it to finish, or pin a release it has in full"
                )
    return None


def moved_dependencies(
    changes: Sequence[Change], catalogs: Sequence[Catalog], facts: HostFacts
) -> list[list[str]]:
    """Per change, the exact-version dependencies (followed through the index) that the
    host has at another version than one apt would pick (its candidate, the newest): apt
    moves an installed package only to its candidate, so an older release's exact
    dependency fails (`Depends: libcudnn9-headers-cuda-12 (= 9.10.2.21-1) but 9.14.0.64-1
    is to be installed`) unless the transaction names it, `name=version`."""
    out: list[list[str]] = []
    for change in changes:
        asked = {t.name for t in targets(change)}
        extra: dict[str, str] = {}
        for t in targets(change):
            cat = _catalog_for(catalogs, t.name)
            taken = taken_version(cat, t) if cat is not None and t.version else None
            if cat is None or taken is None:
                continue
            # (a catalog without Depends, the host's apt-cache madison, reaches no further)
            reached = _walk(cat, t.name, taken, facts, ranged=False)[0][1:]
            for dep, want in reached:
                have = facts.package(dep)
                newest = max(cat.versions(dep), key=debian_key)  # apt's candidate
                if dep not in asked and have and have.version != want and want != newest:
                    extra[dep] = want
        out.append([f"{n}={v}" for n, v in extra.items()])
    return out


def _catalog_for(catalogs: Sequence[Catalog], name: str) -> Catalog | None:
    """The first index that publishes `name`; None for a package none carries."""
    return next((c for c in catalogs if c.versions(name)), None)


def taken_version(cat: Catalog, t: Target) -> str | None:
    """The version apt takes for `t` from `cat`: the newest that matches; None if none does."""
    matching = [v for v in cat.versions(t.name) if version_matches(v, t.version)]
    return max(matching, key=debian_key) if matching else None


def _not_mirrored(cat: Catalog, name: str, version: str, facts: HostFacts) -> str | None:
    """The first file apt would download for `name` at `version` that a gpunode mirror does
    not hold (`lacks`, from its manifest); None for any other repository."""
    lacks: Callable[[str, str], str | None] | None = getattr(cat, "lacks", None)
    if lacks is None:
        return None
    for pkg, ver in closure(cat, name, version, facts):
        missing = lacks(pkg, ver)
        if missing:
            return (
                f"apt would download {missing} ({pkg} {ver}), which the mirror {cat.where}"
                " does not hold: run `gpunode mirror` for this inventory again"
            )
    return None


def _missing_dependency(cat: Catalog, name: str, version: str, facts: HostFacts) -> str | None:
    """The first exact-version dependency, followed from `name` at `version` through the
    index, that neither the index nor the host has."""
    return _walk(cat, name, version, facts, ranged=False)[1]


def closure(cat: Catalog, name: str, version: str, facts: HostFacts) -> list[tuple[str, str]]:
    """`name` at `version` and what apt would install with it, as far as the index tells:
    each dependency the index carries and the host has not installed, followed at the
    version asked for (`=`) or else at the newest the index has that satisfies it. The
    index's own choice stands in for apt's (its pins may pick an older one of a range)."""
    return _walk(cat, name, version, facts, ranged=True)[0]


def _walk(
    cat: Catalog, name: str, version: str, facts: HostFacts, *, ranged: bool
) -> tuple[list[tuple[str, str]], str | None]:
    """The packages reached from `name` at `version` through Depends (`name` first), and
    the first broken exact-version dependency. Only `=` dependencies are followed unless
    `ranged`. A catalog without Depends (the host's apt-cache madison) reaches `name` alone."""
    depends_of = getattr(cat, "depends", None)
    if depends_of is None:
        return [(name, version)], None
    todo = [(name, version)]
    seen: dict[tuple[str, str], None] = {}
    while todo:
        pkg, ver = todo.pop()
        if (pkg, ver) in seen:
            continue
        seen[(pkg, ver)] = None
        for clause in (depends_of(pkg, ver) or "").split(","):
            alts = [m for a in clause.split("|") if (m := _ALT.match(a))]
            if not alts:
                continue
            found: tuple[str, str] | None = None
            broken: list[str] = []
            for m in alts:
                dep, op, want = m.group(1), m.group(2), m.group(3)
                offered = cat.versions(dep)
                if op != "=" and ranged and offered and not facts.package(dep):
                    fits = [v for v in offered if _satisfies(v, op, want)]
                    if fits:
                        found = (dep, max(fits, key=debian_key))
                        break
                    continue
                if op != "=" or not offered:
                    found = ("", "")  # unknown here, or not exact: apt's own to judge
                    break
                if want in offered:
                    found = (dep, want)
                    break
                have = facts.package(dep)
                if have is not None and have.version == want:
                    found = ("", "")
                    break
                newest = sorted(offered, key=debian_key)[-SHOWN:]
                broken.append(
                    f"{dep} (= {want}), which it does not publish (it has {', '.join(newest)})"
                )
            if found is None and not ranged:
                return list(seen), f"{pkg} {ver} in {cat.where} depends on " + " or ".join(broken)
            if found and found[0]:
                todo.append(found)
    return list(seen), None


def _satisfies(version: str, op: str | None, want: str | None) -> bool:
    if op is None or want is None:
        return True
    c = compare_debian(version, want)
    return {"<<": c < 0, "<=": c <= 0, ">=": c >= 0, ">>": c > 0}.get(op, c == 0)
