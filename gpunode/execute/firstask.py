"""What a host's first read asked besides its facts, remembered for the next run.

The facts command also hashes the files the host's roles manage and runs the probes they
guess (`HostRun._ask`), and walking the roles for those needs the planner, the roles
and Jinja imported and every role rendered: a converged apply spent that time before its
facts command could leave. The last run's answer is kept here, under what it depends on
(what the roles see of the host before its facts, `Host.shape`, so hosts alike share one;
the role folders searched; gpunode's planner and operations), so the facts command leaves
at once, without the walk.

A remembered ask is a guess, never a plan: the plan after the facts walks the roles
again and reads what it still lacks (a file to hash, a probe) in one more round trip
(`HostRun.read`), so a stale one costs time, not a wrong change. Kept as plain data
through `diskmemo` (0700, this user's files only).
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunode import diskmemo
from gpunode.roles.probe import Probe

if TYPE_CHECKING:
    from gpunode.inventory.model import Host

KIND = "first-ask"
_CODE = ("execute/firstask.py", "plan/planner.py", "roles/walk.py", "roles/render.py")
"""What makes the ask: the walk, and the operations (roles/ops/*.py) that name the probes."""
Asked = tuple[list[str], list[Probe]]
"""The files to hash and the probes to run."""


@functools.cache
def _code() -> bytes:
    """The digest of the modules that make an ask, read as files: finding them as modules
    would import the operations' package, in a host's thread (execute/warm.py)."""
    root = Path(__file__).resolve().parent.parent
    files = [root / rel for rel in _CODE] + sorted((root / "roles" / "ops").glob("*.py"))
    h = hashlib.sha256(b"gpunode-first-ask-1\0")
    try:
        for path in files:
            h.update(f"{path.relative_to(root)}\0".encode() + path.read_bytes())
    except OSError:
        return b""
    return h.digest()


def _key(host: Host, search: Sequence[Path] | None, extra: Sequence[str]) -> str | None:
    code = _code()
    where = "\0".join(os.fspath(p) for p in search or ())
    return diskmemo.key(code, host.shape().encode(), where.encode(), "\0".join(extra).encode())


_SEEN: dict[str, Asked | None] = {}
"""This process's asks by key: fifty hosts alike read one file, once."""
_SEEN_LOCK = threading.Lock()


def recall(host: Host, search: Sequence[Path] | None, extra: Sequence[str]) -> Asked | None:
    """The ask remembered for hosts like `host` (its roles' view of it), or None."""
    k = _key(host, search, extra)
    if not k:
        return None
    with _SEEN_LOCK:
        if k in _SEEN:
            return _copy(_SEEN[k])
    asked = _read(k)
    with _SEEN_LOCK:
        _SEEN.setdefault(k, asked)
    return _copy(asked)


def _read(k: str) -> Asked | None:
    plain: Any = diskmemo.get(KIND, k)
    try:
        files, probes = plain
        return [str(f) for f in files], [Probe(str(a), str(b), bool(c)) for a, b, c in probes]
    except (TypeError, ValueError):
        return None


def _copy(asked: Asked | None) -> Asked | None:
    return None if asked is None else (list(asked[0]), list(asked[1]))


def remember(host: Host, search: Sequence[Path] | None, extra: Sequence[str], asked: Asked) -> None:
    """Keep `asked` for hosts like `host` (written once a process for hosts alike)."""
    k = _key(host, search, extra)
    if not k:
        return
    with _SEEN_LOCK:
        if _SEEN.get(k) == asked:
            return
        _SEEN[k] = _copy(asked)
    files, probes = asked
    diskmemo.put(KIND, k, [list(files), [[p.key, p.command, p.role_shell] for p in probes]])
