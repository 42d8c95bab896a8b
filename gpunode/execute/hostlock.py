"""A host's apply lock: one run at a time converges a host.

An apply takes the lock before it plans for applying and gives it back when the host's run
ends, failed or not. SSH commands are separate processes, so no lock can be *held* open
across them: the lock is a file, `/var/lib/gpunode/locks/apply.lock` (root-only folder,
0600 file), created only when absent. Each command that reads or writes it first takes
`flock` on a mutex file beside it for the length of that one command, so "is it there,
whose is it, replace it" is one step against any other gpunode; the file itself is written
to a temporary file and linked (new) or renamed (a takeover) into place, never seen half
written.

The lock names its run (the run record's id), the controller (hostname, pid and that
process's start time) and the host's boot id. A run keeps its lock across the reboot it
makes itself: taking its own lock again only writes the new boot id. Whether a lock held
by another run is stale is decided by `stale` (pure; the rules are in docs/reliability.md).
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpunode.transport.base import Transport, TransportError, quote

LOCK_DIR = "/var/lib/gpunode/locks"
LOCK_PATH = f"{LOCK_DIR}/apply.lock"
MUTEX_PATH = f"{LOCK_DIR}/mutex"
CLEAR = f"sudo rm {LOCK_PATH}"
"""What an admin runs on the host to clear a lock they know is stale."""
REBOOT_GRACE = 300.0
"""A run that rebooted the host takes its lock back within seconds of the boot (it polls
every 2 s): a lock from before the boot, on a host up this long, was resumed by no run."""
MUTEX_WAIT = 20
TAKE_TRIES = 3

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")
_BOOT = re.compile(r"[0-9a-f-]{8,64}")
_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Owner:
    """Who holds a host's lock, as its file says."""

    run: str
    controller: str
    pid: int
    pid_start: str = ""
    """The controller process's start time (clock ticks since the controller's boot, from
    /proc): a pid reused by another process does not pass for the run. "" where unknown."""
    started: float = 0.0
    boot: str = ""
    """The host's boot id when the lock was (last) written."""

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return f"run {self.run} (controller {self.controller}, pid {self.pid}, since {since})"


@dataclass(frozen=True)
class Seen:
    """What one take command found on the host."""

    status: Literal["taken", "held", "busy", "unwritable", "unknown"]
    boot: str = ""
    """The host's boot id now."""
    uptime: float = 0.0
    holder: Owner | None = None
    """The lock's owner when it was held by a run (None: held, but not readable as one)."""
    digest: str = ""
    """sha256 of the held lock's bytes: a takeover replaces exactly that lock."""


@dataclass(frozen=True)
class Outcome:
    """The end of taking a host's lock."""

    locked: bool
    """This run holds the lock now (and must release it)."""
    refused: str = ""
    """Why the run may not touch the host ("" when it may)."""
    note: str = ""
    """Something the admin should see: a stale lock taken over, or a host not locked."""


def _word(value: str) -> str:
    """A name as it may stand in the lock: characters outside the safe set become `_`."""
    cleaned = re.sub(r"[^A-Za-z0-9._:+-]", "_", value)[:128].lstrip("._:+-")
    return cleaned or "unknown"


def controller_name() -> str:
    return _word(socket.gethostname())


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat's 22nd field),
    or "" where it cannot be read (no /proc, no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()  # after the command name, from field 3
    return fields[19] if len(fields) > 19 and fields[19].isdigit() else ""


def pid_alive(pid: int, start: str) -> bool:
    """Whether the controller process `pid` (started at `start`) still runs here."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    now = process_start(pid)
    return not (start and now and now != start)


def this_run(run_id: str) -> Owner:
    """The owner this process writes into a lock (the host fills in the boot id)."""
    pid = os.getpid()
    run = _word(run_id or f"pid-{pid}-{int(time.time())}")
    return Owner(run, controller_name(), pid, process_start(pid), round(time.time(), 3))


# -- the commands -------------------------------------------------------------------------


def _guarded(body: str) -> str:
    """`body` under the mutex, in the root-only lock folder; prints `lock: unwritable` when
    that folder cannot be made (a login that is not root, with become: none)."""
    # the folders are made only when absent (a process each, under sudo, on every take and
    # release); the lock folder's mode is set every time
    return (
        f"[ -d {LOCK_DIR} ] || mkdir -p /var/lib/gpunode 2>/dev/null; umask 077\n"
        f"{{ [ -d {LOCK_DIR} ] || mkdir -p {LOCK_DIR} 2>/dev/null; }} && "
        f"chmod 700 {LOCK_DIR} 2>/dev/null && "
        f"exec 9>>{MUTEX_PATH} 2>/dev/null || {{ echo 'lock: unwritable'; exit 0; }}\n"
        f"flock -w {MUTEX_WAIT} 9 || {{ echo 'lock: busy'; exit 0; }}\n" + body
    )


def take_command(me: Owner, replace: str = "") -> str:
    """Create the lock when absent, or replace it when its sha256 is `replace` (a stale
    lock, or this run's own from before its reboot); else print the lock that is there."""
    if replace and not _DIGEST.fullmatch(replace):
        raise ValueError(f"not a sha256: {replace!r}")
    f = LOCK_PATH
    owner = " ".join(
        quote(v)
        for v in (_word(me.run), _word(me.controller), str(int(me.pid)),
                  me.pid_start if me.pid_start.isdigit() else "", f"{me.started:.3f}")
    )  # fmt: skip
    body = f"""read -r boot < /proc/sys/kernel/random/boot_id
echo "boot-now=$boot"
read -r up _ < /proc/uptime
echo "uptime=$up"
if [ -e {f} ]; then
  if [ -z {quote(replace)} ] || [ "$(sha256sum < {f} | cut -d' ' -f1)" != {quote(replace)} ]; then
    echo 'lock: held'
    echo "digest=$(sha256sum < {f} | cut -d' ' -f1)"
    cat {f}
    exit 0
  fi
fi
t=$(mktemp {LOCK_DIR}/.apply.lock.XXXXXX) || {{ echo 'lock: unwritable'; exit 0; }}
printf 'run=%s\\ncontroller=%s\\npid=%s\\npidstart=%s\\nstarted=%s\\nboot=%s\\n' \\
  {owner} "$boot" > "$t" || {{ rm -f "$t"; echo 'lock: unwritable'; exit 0; }}
if [ -e {f} ]; then mv -f "$t" {f}; else ln "$t" {f}; fi && echo 'lock: taken'
rm -f "$t"
"""
    return _guarded(body)


def release_command(run: str) -> str:
    """Remove the lock if it is this run's (never another run's that took it over)."""
    body = f"grep -qxF {quote('run=' + _word(run))} {LOCK_PATH} 2>/dev/null && rm -f {LOCK_PATH}\n"
    return _guarded(body + "echo 'lock: released'")


# -- reading what the host said ---------------------------------------------------------


def parse_owner(text: str) -> Owner | None:
    """The lock file's content as an Owner; None when it is not one (garbage, a part)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("run", "controller", "pid", "pidstart", "started", "boot"):
            fields[key] = value.strip()
    run, controller = fields.get("run", ""), fields.get("controller", "")
    pid, started = fields.get("pid", ""), fields.get("started", "")
    boot, pid_start = fields.get("boot", ""), fields.get("pidstart", "")
    if not (_WORD.fullmatch(run) and _WORD.fullmatch(controller) and pid.isdigit()):
        return None
    try:
        when = float(started)
    except ValueError:
        when = 0.0
    return Owner(
        run,
        controller,
        int(pid),
        pid_start if pid_start.isdigit() else "",
        when,
        boot if _BOOT.fullmatch(boot) else "",
    )


def parse_take(stdout: str) -> Seen:
    head, held, lock = stdout.partition("lock: held\n")
    values: dict[str, str] = {}
    for line in head.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value.strip()
    boot = values.get("boot-now", "")
    boot = boot if _BOOT.fullmatch(boot) else ""
    try:
        uptime = float(values.get("uptime", "0"))
    except ValueError:
        uptime = 0.0
    if held:
        digest_line, _, content = lock.partition("\n")
        digest = digest_line.removeprefix("digest=").strip()
        return Seen("held", boot, uptime, parse_owner(content),
                    digest if _DIGEST.fullmatch(digest) else "")  # fmt: skip
    for status in ("taken", "busy", "unwritable"):
        if f"lock: {status}" in stdout:
            return Seen(status, boot, uptime)  # type: ignore[arg-type]
    return Seen("unknown", boot, uptime)


# -- the rules ----------------------------------------------------------------------------


def stale(
    holder: Owner,
    *,
    me: Owner,
    host_boot: str,
    host_uptime: float,
    alive: Callable[[int, str], bool] = pid_alive,
) -> str:
    """Why `holder`'s lock (another run's) is stale, or "" while its run may still be
    converging the host. Age alone never makes a lock stale: a run on another controller,
    whose process cannot be seen from here, may take hours (a slow mirror, a long build)."""
    if holder.controller == me.controller:
        if not alive(holder.pid, holder.pid_start):
            return f"its controller process (pid {holder.pid} on {holder.controller}) is gone"
        return ""
    if holder.boot and host_boot and holder.boot != host_boot and host_uptime >= REBOOT_GRACE:
        return (
            f"the host booted since it was written (boot {holder.boot} then, {host_boot} now, "
            f"up {host_uptime:.0f} s) and no run took it back after that boot"
        )
    return ""


def refusal(holder: Owner | None) -> str:
    who = holder.describe() if holder is not None else "a lock gpunode cannot read"
    return (
        f"locked by another gpunode apply: {who} converges this host; nothing was changed. "
        f"If you are sure that run is dead, remove its lock on the host: {CLEAR}"
    )


# -- taking and giving back ---------------------------------------------------------------


def take(t: Transport, me: Owner, *, timeout: float = 60.0) -> Outcome:
    """Take the host's lock for `me`, taking over a stale one (said in `note`)."""
    replace, note = "", ""
    for _ in range(TAKE_TRIES):
        res = t.run(take_command(me, replace), sudo=True, timeout=timeout)
        seen = parse_take(res.stdout)
        if seen.status == "taken":
            return Outcome(True, note=note)
        if seen.status == "unwritable":
            return Outcome(False, note=f"not locked: {LOCK_DIR} cannot be written (not root)")
        if seen.status == "busy":
            return Outcome(False, refused=f"another gpunode is taking this host's lock "
                                          f"({MUTEX_PATH} held for {MUTEX_WAIT} s)")  # fmt: skip
        if seen.status == "unknown":
            said = (res.stderr.strip().splitlines() or [f"exit {res.exit_code}"])[-1]
            return Outcome(False, refused=f"cannot take the host's lock ({_printable(said)})")
        holder = seen.holder
        if holder is None or not seen.digest:
            return Outcome(False, refused=refusal(None))
        if holder.run == me.run:  # ours, from before our own reboot: write the new boot id
            replace = seen.digest
            continue
        why = stale(holder, me=me, host_boot=seen.boot, host_uptime=seen.uptime)
        if not why:
            return Outcome(False, refused=refusal(holder))
        replace = seen.digest
        note = f"took over the stale lock of {holder.describe()}: {why}"
    return Outcome(False, refused="the host's lock kept changing while it was taken")


def release(t: Transport, run: str, *, timeout: float = 15.0) -> bool:
    """Give the lock back; False when the host cannot be reached (the lock stays: the
    next run finds it stale by the rules, or the admin clears it)."""
    try:
        res = t.run(release_command(run), sudo=True, timeout=timeout)
    except (TransportError, EOFError, OSError):
        return False
    return "lock: released" in res.stdout


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:200]
