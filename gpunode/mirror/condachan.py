"""The conda packages the envs' `conda create` takes, as a local channel in the mirror.

Which packages: conda's solver's answer for the env's specs (gpunode.mirror.condasolve:
py-rattler against the channels' repodata.json, linux-64 and noarch, strict channel
priority, the host's virtual packages), so the set is one conda on the host can solve
from. conda itself and `conda index` (conda-index imports conda) are not installable
from PyPI, so the channel is written here in conda's documented format:
`<channel>/<subdir>/repodata.json` ({"info": {"subdir"}, "packages", "packages.conda",
"repodata_version": 1}) listing the files beside it, each record as the upstream channel
gives it (name, version, build, depends, sha256, size); each file is checked against its
record's sha256. conda on the host solves among exactly these, and checks each sha256.
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode.changes import Packages
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host
from gpunode.mirror import condasolve
from gpunode.mirror.condasolve import Virtual
from gpunode.mirror.files import write_atomic, write_manifest

SUBDIRS = ("linux-64", "noarch")
UPSTREAM = ".upstream-repodata.json"  # the channel's own repodata, kept for If-Modified-Since
DEFAULTS = ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r")
_SAFE = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")


@dataclass(frozen=True)
class CondaSet:
    """One env's `conda create`: its channels (upstream URLs), its specs, and the host's
    virtual packages the solver takes as installed."""

    channels: tuple[str, ...]
    specs: tuple[str, ...]
    # for messages: the host, the env's prefix, the file its specs came from; hosts with
    # the same set share one solve, named after one of them
    env: str = field(default="a conda env", compare=False)
    virtual: tuple[Virtual, ...] = condasolve.host_virtual()


def conda_set(takes: Packages, host: Host, facts: HostFacts) -> CondaSet:
    """The CondaSet of a host's conda step."""
    env = f"{host.name}: conda env {takes.env}" + (f" ({takes.origin})" if takes.origin else "")
    virtual = condasolve.virtual_of(host, facts)
    return CondaSet(channel_urls(takes.channels), takes.specs, env, virtual)


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


Record = tuple[str, str, str, dict[str, Any]]  # channel URL, subdir, file name, record


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
    repodata: dict[str, list[condasolve.Repodata]] = {}  # by channel URL, fetched once
    records: dict[tuple[str, str, str], Record] = {}
    for s in sets:
        for url in s.channels:
            if url in repodata:
                continue
            repodata[url] = []
            for subdir in SUBDIRS:
                upstream = root / channel_rel(url) / subdir / UPSTREAM
                index(f"{url}/{subdir}/repodata.json", upstream)
                if upstream.is_file():
                    repodata[url].append((url, subdir, upstream))
                    for r in upstream_records(url, subdir, upstream):
                        records[r[:3]] = r
        given = [r for url in s.channels for r in repodata[url]]
        taken = [records[k] for k in sorted(condasolve.solve(s.env, s.specs, given, s.virtual))]
        for url, subdir, name, rec in taken:
            sha, size = str(rec.get("sha256", "")), int(rec.get("size") or 4 * 1024**3)
            if not re.fullmatch(r"[0-9a-f]{64}", sha):
                raise ValueError(f"{url}/{subdir}/repodata.json: {name} has no sha256")
            download(f"{url}/{subdir}/{name}", root / channel_rel(url) / subdir / name, sha, size)
        for url in s.channels:
            write_channel(root / channel_rel(url), [t for t in taken if t[0] == url])
