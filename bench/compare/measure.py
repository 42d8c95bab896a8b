"""Run one tool once and report what it cost the controller, as one JSON line.

`python -m bench.compare.measure OUT.json -- COMMAND...`

This process makes itself a child subreaper, so every process the tool starts (Ansible's
forks, OpenSSH ControlPersist masters that daemonize) ends up reaped here, and
RUSAGE_CHILDREN covers the whole tool process tree: user + system CPU seconds, and
ru_maxrss, the peak resident memory of the largest single process in the tree.
Wall time is from start to the tool's exit; stragglers it left (ssh masters) are then
asked to stop and reaped, so their CPU time counts too.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def _children() -> list[int]:
    me = str(os.getpid())
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = stat.rsplit(")", 1)[1].split()[1]
        if ppid == me:
            out.append(int(entry))
    return out


def _reap_all(grace: float = 5.0) -> None:
    """Stop what the tool left behind (only our own descendants), then reap everything."""
    deadline = time.monotonic() + grace
    for pid in _children():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                for left in _children():
                    os.kill(left, signal.SIGKILL)
                deadline = time.monotonic() + grace
            time.sleep(0.05)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m bench.compare.measure OUT.json -- COMMAND...", file=sys.stderr)
        return 2
    out, cmd = Path(argv[0]), argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    start = time.monotonic()
    proc = subprocess.Popen(cmd)
    code = proc.wait()
    wall = time.monotonic() - start
    _reap_all()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "rc": code,
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "maxrss_mib": ru.ru_maxrss / 1024.0,
    }
    out.write_text(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
