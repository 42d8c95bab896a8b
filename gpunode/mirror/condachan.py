"""The conda packages the envs' `conda create` takes, as a local channel in the mirror.

conda's solver is not on this machine (conda, and `conda index` from conda-index, which
imports conda, are not installable from PyPI), so the channel is written here in conda's
documented format: `<channel>/<subdir>/repodata.json` ({"info": {"subdir"}, "packages",
"packages.conda", "repodata_version": 1}) listing the files beside it, each record as the
upstream channel gives it (name, version, build, depends, sha256, size). Which files: for
each spec the plan asks for (`python=3.11`), the newest record that matches it from the
first channel that has the name (conda's strict channel priority), then the same for each
`depends` not already met by a record taken, through linux-64 and noarch. conda on the
host solves among exactly these, and checks each file's sha256 as usual.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpunode.mirror.files import write_atomic, write_manifest

SUBDIRS = ("linux-64", "noarch")
UPSTREAM = ".upstream-repodata.json"  # the channel's own repodata, kept for If-Modified-Since
DEFAULTS = ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r")
_SAFE = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")


@dataclass(frozen=True)
class CondaSet:
    """One env's `conda create`: its channels (upstream URLs) and its specs."""

    channels: tuple[str, ...]
    specs: tuple[str, ...]


def channel_url(channel: str) -> str:
    """conda's URL of a channel as the inventory names it."""
    if "://" in channel:
        return channel.rstrip("/")
    return f"https://conda.anaconda.org/{channel}"


def channel_urls(channels: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for c in channels or ["defaults"]:
        out += DEFAULTS if c == "defaults" else [channel_url(c)]
    return tuple(dict.fromkeys(out))


def channel_rel(url: str) -> str:
    """Where a channel goes in the mirror: conda/<its URL's path> (conda/conda-forge,
    conda/pkgs/main); ValueError for a path that is not plain names."""
    path = urllib.parse.urlsplit(url).path.strip("/")
    if not _SAFE.fullmatch(path) or ".." in path.split("/"):
        raise ValueError(f"{url}: not a channel URL gpunode mirror can lay out")
    return f"conda/{path}"


# --- conda's version order and match specs, as far as channels' depends use them ---


def _key(version: str) -> list[tuple[int, Any]]:
    """conda's VersionOrder, flattened: numbers above letters, `dev` lowest, `post`
    highest; 3.12.0a0 < 3.12.0."""
    out: list[tuple[int, Any]] = []
    for tok in re.findall(r"\d+|[a-z]+", version.lower().split("+")[0].split("!")[-1]):
        if tok.isdigit():
            out.append((1, int(tok)))
        else:
            out.append((-2, tok) if tok == "dev" else (2, tok) if tok == "post" else (0, tok))
    return out


def _cmp(a: str, b: str) -> int:
    ka, kb = _key(a), _key(b)
    n = max(len(ka), len(kb))
    ka += [(1, 0)] * (n - len(ka))
    kb += [(1, 0)] * (n - len(kb))
    return (ka > kb) - (ka < kb)


_OP = re.compile(r"(>=|<=|==|!=|~=|>|<|=)?(.+)")


def _one(version: str, constraint: str) -> bool:
    m = _OP.fullmatch(constraint.strip())
    if m is None:
        return False
    op, want = m[1] or "", m[2]
    if op in ("", "=") or want.endswith("*"):  # fuzzy: 3.11, 3.11.*, 3.11*
        stem = want.rstrip("*").rstrip(".")
        return version == stem or version.startswith(stem + ".") or not stem
    c = _cmp(version, want)
    return {"==": c == 0, "!=": c != 0, ">=": c >= 0, "~=": c >= 0, ">": c > 0,
            "<=": c <= 0, "<": c < 0}[op]  # fmt: skip


def parse_spec(spec: str) -> tuple[str, str, str]:
    """(name, version constraint, build glob) of `name [version [build]]` or
    `name=version[=build]`; empty for what is not given."""
    words = spec.split()
    if len(words) == 1 and "=" in spec and "==" not in spec:
        words = spec.split("=")
    elif len(words) == 1 and "==" in spec:
        name, _, version = spec.partition("==")
        words = [name, "==" + version]
    words += ["", ""]
    return words[0], words[1], words[2]


def matches(record: dict[str, Any], version: str, build: str) -> bool:
    v = str(record.get("version", ""))
    ok = any(all(_one(v, c) for c in alt.split(",")) for alt in version.split("|"))
    return (not version or ok) and (not build or fnmatch.fnmatchcase(str(record["build"]), build))


# --- the closure ---

Record = tuple[str, str, str, dict[str, Any]]  # channel URL, subdir, file name, record


def closure(specs: Iterable[str], channels: dict[str, list[Record]]) -> list[Record]:
    """The records `specs` take with what their depends reach (see the module's doc);
    ValueError naming a spec no channel meets."""
    taken: dict[str, list[Record]] = {}
    todo = list(specs)
    while todo:
        spec = todo.pop(0)
        name, version, build = parse_spec(spec)
        if name.startswith("__"):
            continue  # a virtual package (__glibc): the host's, not a file
        if any(matches(r[3], version, build) for r in taken.get(name, [])):
            continue
        for records in channels.values():  # the first channel that has the name
            named = [r for r in records if r[3].get("name") == name]
            if named:
                break
        fits = [r for r in named if matches(r[3], version, build)]
        if not fits:
            raise ValueError(f"no channel of {', '.join(channels)} has {spec}")
        best = max(fits, key=lambda r: (_key(str(r[3]["version"])), r[3].get("build_number", 0)))
        taken.setdefault(name, []).append(best)
        todo += [str(d) for d in best[3].get("depends", [])]
    return [r for rs in taken.values() for r in rs]


def upstream_records(url: str, subdir: str, repodata: Path) -> list[Record]:
    doc = json.loads(repodata.read_text())
    return [
        (url, subdir, name, rec)
        for group in ("packages", "packages.conda")
        for name, rec in (doc.get(group) or {}).items()
        if isinstance(rec, dict) and "/" not in name and name not in ("", ".", "..")
    ]


def write_channel(folder: Path, taken: Iterable[Record]) -> None:
    """<folder>/<subdir>/repodata.json of `taken` and of an earlier run's files still
    there (another env may want them)."""
    new: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in SUBDIRS}
    for _, subdir, name, rec in taken:
        new[subdir][name] = rec
    for subdir, records in new.items():
        path = folder / subdir / "repodata.json"
        with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
            before = json.loads(path.read_text())
            for group in ("packages", "packages.conda"):
                for name, rec in (before.get(group) or {}).items():
                    if (folder / subdir / name).is_file():
                        records.setdefault(name, rec)
        doc = {
            "info": {"subdir": subdir},
            "packages": {n: r for n, r in sorted(records.items()) if n.endswith(".tar.bz2")},
            "packages.conda": {n: r for n, r in sorted(records.items()) if n.endswith(".conda")},
            "removed": [],
            "repodata_version": 1,
        }
        write_atomic(path, json.dumps(doc, indent=1))
        # what plan checks an env's `conda create` against (gpunode.plan.mirrorcheck)
        write_manifest(path.parent, {n: str(r.get("sha256", "")) for n, r in records.items()})


Fetch = Callable[[str, Path], None]
"""Bring the file at a URL to a path, up to date (If-Modified-Since)."""
Download = Callable[[str, Path, str, int], None]
"""Bring the file at a URL to a path, checked against its sha256 (kept when it matches)."""


def fetch(sets: Iterable[CondaSet], root: Path, index: Fetch, download: Download) -> None:
    """Each set's packages in the mirror's local channels under `root`."""
    for s in sets:
        channels: dict[str, list[Record]] = {}
        for url in s.channels:
            rel = channel_rel(url)
            channels[url] = []
            for subdir in SUBDIRS:
                upstream = root / rel / subdir / UPSTREAM
                index(f"{url}/{subdir}/repodata.json", upstream)
                if upstream.is_file():
                    channels[url] += upstream_records(url, subdir, upstream)
        taken = closure(s.specs, channels)
        for url, subdir, name, rec in taken:
            sha, size = str(rec.get("sha256", "")), int(rec.get("size") or 4 * 1024**3)
            if not re.fullmatch(r"[0-9a-f]{64}", sha):
                raise ValueError(f"{url}/{subdir}/repodata.json: {name} has no sha256")
            download(f"{url}/{subdir}/{name}", root / channel_rel(url) / subdir / name, sha, size)
        for url in s.channels:
            write_channel(root / channel_rel(url), [t for t in taken if t[0] == url])
