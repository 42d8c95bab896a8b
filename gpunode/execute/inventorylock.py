"""The controller's lock on an inventory: one apply of an inventory at a time, here.

Held with `flock` on a file under the state directory's `locks/`, named for the inventory's
real path, for as long as the process lives: the kernel releases it when the process ends,
however it ends, so it can never be stale. The file says who holds it (pid, start, run id)
so a second apply can name the first. Hosts are locked too, on the hosts themselves
(`hostlock.py`): this lock only makes a second apply from the same controller fail at once,
before it reads or plans anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from pathlib import Path

from gpunode.records import state_dir


class InventoryLocked(Exception):
    """Another apply of the inventory runs on this controller."""


class InventoryLock:
    def __init__(self, fd: int, path: Path, inventory: str) -> None:
        self.fd = fd
        self.path = path
        self.inventory = inventory
        self.started = time.time()
        self.write()

    def write(self, run: str = "") -> None:
        """Say who holds the lock (and, once the record exists, its run id)."""
        text = f"pid={os.getpid()}\nstarted={self.started:.3f}\nrun={run}\n"
        text += f"inventory={self.inventory}\n"
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, text.encode(), 0)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def lock_path(inventory: str) -> Path:
    real = os.path.realpath(inventory)
    key = hashlib.sha256(real.encode()).hexdigest()[:24]
    return state_dir() / "locks" / f"apply-{key}.lock"


def take(inventory: str) -> InventoryLock:
    """Lock `inventory` for this process, or raise InventoryLocked naming the holder."""
    path = lock_path(inventory)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise InventoryLocked(
            f"another gpunode apply of {os.path.realpath(inventory)} is running on this "
            f"controller ({holder}); wait for it to end, or stop it. Nothing was contacted."
        ) from None
    except BaseException:
        os.close(fd)
        raise
    return InventoryLock(fd, path, os.path.realpath(inventory))


def _holder(fd: int) -> str:
    """Who the lock file says holds it (read a few times: it may be being written)."""
    fields: dict[str, str] = {}
    for _ in range(5):
        text = os.pread(fd, 4096, 0).decode(errors="replace")
        fields = dict(ln.partition("=")[::2] for ln in text.splitlines() if "=" in ln)
        if fields.get("pid", "").isdigit():
            break
        time.sleep(0.05)
    pid = fields.get("pid", "")
    if not pid.isdigit():
        return "pid unknown"
    out = f"pid {pid}"
    try:
        since = time.gmtime(float(fields.get("started", "")))
        out += time.strftime(", since %Y-%m-%d %H:%M:%S UTC", since)
    except ValueError:
        pass
    run = fields.get("run", "")
    if run and all(ch.isalnum() or ch in "-._" for ch in run):
        out += f", run {run}"
    return out
