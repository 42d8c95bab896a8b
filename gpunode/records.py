"""Run records: one JSON file per run under the user's state directory.

GPUNODE_STATE_DIR overrides platformdirs' user_state_dir("gpunode"). A record is
written when the run starts (status "running") and rewritten when it ends ("finished",
or "interrupted" for a run that was stopped), so a run whose controller was killed still
leaves a trace: it holds the controller's host name, process id and boot id, and a
"running" record whose process is gone (or whose controller rebooted since) reads as
"abandoned" (`load_run`; `settle_abandoned` writes it so). A record that cannot be
written when the run ends costs a warning, never the run's summary. No secrets go in.

Records are private: the state directory and its runs/ are 0700 (an existing one is
tightened; one someone else owns is refused, StateDirError), each record is created 0600 (no
window in which it is readable), and `--diff` never shows the content of a managed file
that is not world-readable on the host, before or after (see `private_file_note`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import socket
import stat
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIR_MODE = 0o700
FILE_MODE = 0o600


def state_dir() -> Path:
    env = os.environ.get("GPUNODE_STATE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_state_dir

    return Path(user_state_dir("gpunode"))


def runs_dir() -> Path:
    return state_dir() / "runs"


def running_dir() -> Path:
    """One empty file per record that says "running" (named by the record's id), so the
    next run settles the dead ones without reading every record it ever wrote."""
    return runs_dir() / ".running"


def _warn(message: str) -> None:
    sys.stderr.write(f"gpunode: warning: {message}\n")
    sys.stderr.flush()


class StateDirError(Exception):
    """The state directory cannot be trusted with run records (someone else owns it)."""


def _private_dir(path: Path) -> None:
    """Make `path` (and missing parents) a directory only its owner can enter: created
    0700; an existing one with group or other bits is set to 0700."""
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, DIR_MODE)  # mode & ~umask: never wider than 0700
    st = os.stat(path)
    if st.st_uid != os.geteuid():
        raise StateDirError(
            f"the state directory {path} is owned by uid {st.st_uid}, not by you (uid "
            f"{os.geteuid()}): whoever owns it could read or plant gpunode's run records; "
            "set GPUNODE_STATE_DIR (or state_dir in gpunode.toml) to a directory of your own"
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        if st.st_mode & stat.S_ISVTX:
            _warn(
                f"{path} is a shared directory (mode {stat.S_IMODE(st.st_mode):04o}): left as "
                "it is; set GPUNODE_STATE_DIR to a directory of your own"
            )
            return
        try:
            os.chmod(path, DIR_MODE)
        except OSError as exc:
            _warn(
                f"{path} has mode {stat.S_IMODE(st.st_mode):04o} and cannot be made 0700 "
                f"({exc.strerror}): other users may read the run records in it"
            )
            return
        for old in path.glob("*.json"):  # records written before records were private
            with contextlib.suppress(OSError):
                if old.stat().st_uid == os.geteuid():
                    os.chmod(old, FILE_MODE)


def _write_private(path: Path, text: str) -> None:
    """Write `path` atomically, created 0600 (never wider), through a temporary file that
    no one else can have planted (O_EXCL, O_NOFOLLOW)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def world_readable(mode: int | None) -> bool:
    return mode is not None and bool(mode & stat.S_IROTH)


_CHMOD_FLAGS = frozenset(
    {"-R", "-v", "-c", "-f", "--recursive", "--verbose", "--changes", "--silent", "--quiet"}
)


def _octal(spec: str) -> int | None:
    try:
        return int(spec, 8)
    except ValueError:
        return None  # symbolic (u+r, -w...), --reference=...: unknown


def _chmod_modes(commands: Iterable[str]) -> list[int | None]:
    """The modes that `chmod [flags] [--] MODE` and `install -m MODE` in these commands set
    (None for one that cannot be read as octal: symbolic, or a command that cannot be split)."""
    modes: list[int | None] = []
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            modes.append(None)
            continue
        for i, word in enumerate(words):
            if word == "chmod":
                rest = words[i + 1 :]
                while rest and rest[0] in _CHMOD_FLAGS:
                    rest = rest[1:]
                if rest and rest[0] == "--":
                    rest = rest[1:]
                modes.append(_octal(rest[0]) if rest else None)
            elif word == "-m" and "install" in words[:i]:
                modes.append(_octal(words[i + 1]) if i + 1 < len(words) else None)
            elif word.startswith("--mode=") or (word.startswith("-m") and "install" in words[:i]):
                modes.append(_octal(word.split("=", 1)[1] if "=" in word else word[2:]))
    return modes


def private_file_note(current_mode: int | None, commands: Iterable[str]) -> str:
    """For `--diff` of a managed file: "" when its content may be recorded, else the note
    recorded instead of it.

    The content is left out when the file on the host is not world-readable now
    (`current_mode`, None when it does not exist), or when the change sets a mode that is
    not world-readable (or one that cannot be read, symbolic say)."""
    modes = _chmod_modes(commands)
    if current_mode is not None and not world_readable(current_mode):
        return f"(content of a {current_mode & 0o7777:04o} file not recorded)\n"
    for m in modes:
        if not world_readable(m):
            shown = f"{m & 0o7777:04o}" if m is not None else "symbolic-mode"
            return f"(content of a {shown} file not recorded)\n"
    return ""


def boot_id() -> str | None:
    """This machine's boot id (Linux), None where there is none."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, from /proc), None when it is gone
    or unknown: with the pid, it tells a live run from a new process given the same pid."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat_line.rpartition(")")[2].split()  # the name, in parentheses, may hold spaces
    return fields[19] if len(fields) > 19 else None


def controller() -> dict[str, Any]:
    """Who runs this record: host name, process id, its start and the boot id."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "pid_start": process_start(pid),
            "boot_id": boot_id()}  # fmt: skip


def abandoned(data: dict[str, Any]) -> str | None:
    """Why a "running" record's run is dead (its process gone, or the controller rebooted
    since it started), None while it may still run or when it is not this machine's."""
    if data.get("status") != "running":
        return None
    ctl = data.get("controller")
    if not isinstance(ctl, dict) or ctl.get("host") != socket.gethostname():
        return None  # written by an older gpunode, or on another controller: cannot tell
    now = boot_id()
    if ctl.get("boot_id") and now and ctl["boot_id"] != now:
        return "the controller rebooted since it started"
    pid = ctl.get("pid")
    if not isinstance(pid, int):
        return None
    start = process_start(pid)
    if start is None or (ctl.get("pid_start") and start != ctl["pid_start"]):
        return f"its process ({pid}) is gone"
    return None


@dataclass(frozen=True)
class InventoryId:
    """Which inventory a record is of: its resolved path, and the `name:` it may set. Two
    inventories with the same host names (a staging and a production `gpu01`) never share
    records: a named inventory owns the records of its name, an unnamed one those of its
    path that no name claims."""

    path: str
    name: str | None = None

    @classmethod
    def of(cls, path: str | Path, name: str | None = None) -> InventoryId:
        return cls(str(Path(path).resolve()), name or None)

    @property
    def label(self) -> str:
        """How views name it: the name, else the path."""
        return self.name or self.path

    def owns(self, data: dict[str, Any]) -> bool:
        """Whether the record `data` is of this inventory."""
        theirs = data.get("inventory_name") or None
        if self.name is not None:
            return theirs == self.name
        return theirs is None and data.get("inventory") == self.path


class Record:
    def __init__(
        self,
        command: str,
        inventory: str | InventoryId,
        options: dict[str, Any],
    ) -> None:
        ident = inventory if isinstance(inventory, InventoryId) else InventoryId.of(inventory)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime())
        self.id = f"{stamp}-{secrets.token_hex(3)}"
        self.path = runs_dir() / f"{self.id}.json"
        self.data: dict[str, Any] = {
            "id": self.id,
            "command": command,
            "inventory": ident.path,
            "inventory_name": ident.name,
            "options": options,
            "started": time.time(),
            "finished": None,
            "status": "running",
            "exit_code": None,
            "controller": controller(),
            "hosts": {},
        }
        self._dirs_checked = False

    def save(self) -> Path:
        if not self._dirs_checked:
            _private_dir(self.path.parent.parent)
            _private_dir(self.path.parent)
            self._dirs_checked = True
        running = self.data.get("status") == "running"
        if running:  # the marker first: a record "running" without one would never settle
            _mark_running(self.id)
        _write_private(self.path, json.dumps(self.data, indent=2, default=str) + "\n")
        if not running:
            _unmark_running(self.id)
        return self.path

    def finish(
        self, hosts: dict[str, Any], exit_code: int, seconds: float, *, status: str = "finished"
    ) -> Path:
        """Write the run's end; a record that cannot be written (its directory made
        read-only, a full disk) is a warning: the run itself is over, and its summary stands."""
        self.data.update(
            finished=time.time(),
            status=status,
            exit_code=exit_code,
            seconds=seconds,
            hosts=hosts,
        )
        try:
            return self.save()
        except OSError as exc:
            _warn(f"the run record {self.path} could not be written ({exc.strerror or exc}): "
                  "the summary below is the run's only account")  # fmt: skip
            return self.path


def list_runs() -> list[Path]:
    d = runs_dir()
    return sorted(d.glob("*.json")) if d.is_dir() else []


def find_run(name: str | None) -> Path | None:
    runs = list_runs()
    if not runs:
        return None
    if name is None:
        return runs[-1]
    p = Path(name)
    if p.is_file():
        return p
    matches = [r for r in runs if r.stem == name or r.stem.startswith(name)]
    return matches[-1] if matches else None


def load_run(path: Path) -> dict[str, Any]:
    """A record; a "running" one whose run is dead reads as "abandoned" (with `abandoned`
    saying why)."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    why = abandoned(data)
    if why is not None:
        data["status"], data["abandoned"] = "abandoned", why
    return data


def runs_of(inventory: InventoryId) -> list[dict[str, Any]]:
    """Every readable record of `inventory`, oldest first: another inventory's hosts of the
    same names are not these."""
    out = []
    for path in list_runs():
        try:
            data = load_run(path)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and inventory.owns(data):
            out.append(data)
    return out


def _mark_running(run_id: str) -> None:
    marks = running_dir()
    if not marks.is_dir():
        _private_dir(marks)
    path = marks / run_id
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), FILE_MODE))


def _unmark_running(run_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (running_dir() / run_id).unlink()


def settle_abandoned() -> list[dict[str, Any]]:
    """Write "abandoned" into every record whose run is dead but says "running" (the next
    run does this, so no record stays "running"); returns those records.

    Only the records marked running (`running_dir`) are read: the cost of a run's start
    does not grow with the number of records kept. A state directory from before the
    markers is read whole once."""
    marks = running_dir()
    if marks.is_dir():
        paths = [runs_dir() / f"{m.name}.json" for m in sorted(marks.iterdir())]
    else:
        paths = list_runs()
        if runs_dir().is_dir():
            _private_dir(marks)
    settled = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            with contextlib.suppress(OSError):  # its record removed; not one being written
                if time.time() - (marks / path.stem).stat().st_mtime > 3600:
                    _unmark_running(path.stem)
            continue
        except OSError:
            continue
        try:
            if '"status": "running"' not in text:
                _unmark_running(path.stem)  # finished, its marker left by a crash after
                continue  # most records of a whole read: no need to parse them
            data = json.loads(text)
            why = abandoned(data) if isinstance(data, dict) else None
            if why is None:
                _mark_running(path.stem)  # alive (or another controller's): settled later
                continue
            data["status"], data["abandoned"] = "abandoned", why
            _write_private(path, json.dumps(data, indent=2, default=str) + "\n")
            _unmark_running(path.stem)
            settled.append(data)
        except (OSError, ValueError):
            continue  # not ours to fix, or not a record
    return settled
