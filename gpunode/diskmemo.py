"""Parsed data files kept between runs, so that a converged apply does not parse them again.

Every apply parses the same YAML: a dozen role files and the compatibility rules. The
parser is ruamel's pure-Python one (the loader's bounds and positions need it), and it
cost a converged one-host apply more CPU than the rest of its plan (docs/benchmarks.md,
"The converged path"). Such a value is stored once made, under a key that is the sha256
of everything it is made from: the files' bytes and the code that reads them (gpunode's
modules and ruamel's). A changed file, another gpunode or another ruamel makes it again.

Only plain data (dicts, lists, strings, numbers) is stored, pickled; it is read back by an
unpickler that refuses every class, so a cache file can hold no code. The folder is
`$GPUNODE_CACHE_DIR/KIND` (or the user's cache folder, as the repository indexes'), made
0700; a folder or file that is not this user's, or that others may write, is not read. A
cache that cannot be read or written is a miss: a run never depends on it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import os
import pickle
import stat
import tempfile
from pathlib import Path
from typing import Any

MAX_FILE = 1024 * 1024
"""Files larger than this are parsed every time (a role's are a few KiB)."""
MAX_CACHED = 16 * MAX_FILE
MAX_ENTRIES = 512
_FORMAT = b"gpunode-diskmemo-1\0"
_MISS = (OSError, EOFError, TypeError, ValueError, pickle.PickleError)
"""What a cache file that cannot be read or written raises: a miss."""


def cache_dir(kind: str) -> Path:
    env = os.environ.get("GPUNODE_CACHE_DIR")
    if env:
        return Path(env) / kind
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("gpunode")) / kind


@functools.cache
def code_of(*modules: str) -> bytes:
    """The digest of these modules' source files (found, not imported); b"" when one has
    none."""
    h = hashlib.sha256(_FORMAT)
    for name in (__name__, *modules):
        try:
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.origin or not os.path.isfile(spec.origin):
                return b""
            h.update(Path(spec.origin).read_bytes())
        except (ImportError, ValueError, OSError):
            return b""
    return h.digest()


def small_file(path: Path) -> bytes | None:
    """The file's bytes; b"" for no file; None for anything but a small regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return b""
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE:
            return None
        data = os.read(fd, MAX_FILE + 1)
        return data if len(data) <= MAX_FILE else None
    except OSError:
        return None
    finally:
        os.close(fd)


def key(code: bytes, *parts: bytes | None) -> str | None:
    """The key of a value made by `code` from `parts`; None (not cached) when the code is
    unknown or a part could not be read."""
    if not code or any(p is None for p in parts):
        return None
    h = hashlib.sha256(code)
    for p in parts:
        assert p is not None
        h.update(f"{len(p)}\0".encode() + p)
    return h.hexdigest()


class _PlainOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a cache file holds no {module}.{name}")


def get(kind: str, k: str) -> Any:
    """The value stored under `k`, or None. What is read decides what the roles do on the
    hosts, so a file or folder that someone else could have written is a miss."""
    try:
        folder = cache_dir(kind)
        fd = os.open(folder / k, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if not all(_ours(st) for st in (os.stat(folder), os.fstat(fd))):
                return None
            raw = os.read(fd, MAX_CACHED + 1)
        finally:
            os.close(fd)
        return _PlainOnly(io.BytesIO(raw)).load() if len(raw) <= MAX_CACHED else None
    except _MISS:
        return None


def _ours(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def put(kind: str, k: str, value: Any) -> None:
    """Store `value` (plain data: what `get` can read back) under `k`; failures are ignored."""
    with contextlib.suppress(*_MISS):
        raw = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        _PlainOnly(io.BytesIO(raw)).load()  # raises for anything but plain data
        folder = cache_dir(kind)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
            os.replace(tmp, folder / k)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _prune(folder, k)


def _prune(folder: Path, keep: str) -> None:
    """Past MAX_ENTRIES values (roles of many temporary folders: a test suite), drop the
    least recently written half (never `keep`, just written)."""
    entries = [e for e in os.scandir(folder) if not e.name.startswith(".") and e.name != keep]
    if len(entries) < MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns)
    for e in entries[: len(entries) - MAX_ENTRIES // 2]:
        with contextlib.suppress(OSError):
            os.unlink(e.path)
