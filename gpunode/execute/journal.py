"""The step journal's writes, folded into each change's own commands: no round trip of
their own.

The first command begins the change's entry (its run, title, commands, and every
command's stdin in a root-only file) before it runs; each command that succeeds moves the
entry's step counter on to the next, and the last one ends the entry (removes it). An
entry left behind (the controller killed, the connection lost, a command failed) is read
by the next facts round trip (facts/script.sh `journal`), and the planner runs that
change again, whole (plan/rerun.py). Changes that do not run as root keep no entry: the
journal is root's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import time

from gpunode.changes import Change
from gpunode.facts.model import JOURNAL_DIR

WRITE_FAILED = "gpunode: the step journal ({dir}) could not be written; nothing was run"


def unrecorded_run() -> str:
    """The run's name in an entry when it keeps no record (a library call)."""
    return f"pid-{os.getpid()}-{int(time.time())}"


def entry_key(c: Change) -> str:
    """One entry per change: the same role and task begun again replaces it."""
    return hashlib.sha256(f"{c.role}\0{c.task}".encode()).hexdigest()[:16]


def entry_line(c: Change, run_id: str) -> str:
    """KEY.json's one line: what `JournalEntry` reads back (stdin only as a flag)."""
    doc = {
        "v": 1,
        "run": run_id,
        "role": c.role,
        "task": c.task,
        "op": c.op,
        "steps": [{"command": s.command, "stdin": s.stdin is not None} for s in c.steps],
        "apt": c.apt,
        "long_running": c.long_running,
        "before_reboot": c.before_reboot,
        "reload": c.reload,
        "tags": list(c.tags),
    }
    return json.dumps(doc, separators=(",", ":"))


def journaled(c: Change) -> bool:
    """Root's changes with commands; a change run as the login user cannot write here."""
    return c.sudo and bool(c.steps)


def commands(
    c: Change, run_id: str, directory: str = JOURNAL_DIR
) -> list[tuple[str, bytes | None]]:
    """Each step's command and stdin as the host runs them, the journal's writes included.
    The step's own command runs in a subshell, so that an `exit` in it still lets the
    entry end; its exit status is the command's."""
    own = [(s.command, s.stdin.encode() if s.stdin is not None else None) for s in c.steps]
    if not journaled(c):
        return own
    key = entry_key(c)
    d = shlex.quote(directory)
    kept = b"".join(data for _, data in own if data is not None)
    step = f"{d}/{key}.step"
    out: list[tuple[str, bytes | None]] = []
    for n, (command, data) in enumerate(own, 1):
        head = ""
        if n == 1:
            head = _begin(c, run_id, key, directory, [s for _, s in own]) + "\n"
            data = kept + (data or b"") if kept or data is not None else None
        if n == len(own):
            tail = f"{{ {end_command(c, directory)}; }}"
        else:  # the next command is the one reached (best effort, no fork: the shell's own)
            tail = f"{{ printf '{n + 1}\\n' > {step}; }} 2>/dev/null"
        out.append((f"{head}(\n{command}\n)\nrc=$?\n[ $rc -ne 0 ] || {tail}\nexit $rc", data))
    return out


def _begin(c: Change, run_id: str, key: str, directory: str, stdins: list[bytes | None]) -> str:
    """Every command's stdin (0600, read from the first command's stdin by exact byte
    counts), the counter at 1, then KEY.json renamed into place: the entry has begun."""
    d = shlex.quote(directory)
    lines = [f"( umask 022 && {{ [ -d {d} ] || mkdir -p -- {d}; }}"]
    for n, data in enumerate(stdins, 1):
        if data is None:
            continue
        tmp, dest = f"{d}/{key}.{n}.in.tmp", f"{d}/{key}.{n}.in"
        read = (
            f"dd bs={len(data)} count=1 iflag=fullblock of={tmp} 2>/dev/null"
            if data
            else f": > {tmp}"
        )
        lines.append(f"( umask 077 && {read} ) && mv -f -- {tmp} {dest}")
    lines.append(f"printf '1\\n' > {d}/{key}.step")
    lines.append(
        f"printf '%s\\n' {shlex.quote(entry_line(c, run_id))} > {d}/{key}.json.tmp"
        f" && mv -f -- {d}/{key}.json.tmp {d}/{key}.json )"
    )
    said = shlex.quote(WRITE_FAILED.format(dir=directory))
    return " &&\n  ".join(lines) + f" || {{ echo {said} >&2; exit 1; }}"


def end_command(c: Change, directory: str = JOURNAL_DIR) -> str:
    """The entry ended: KEY.json first (what the facts read), then its other files."""
    d, key = shlex.quote(directory), entry_key(c)
    return f"rm -f -- {d}/{key}.json {d}/{key}.*"
