"""Reading /proc: children, names and ages of processes, and a lab's leftover processes."""

from __future__ import annotations

import os
from pathlib import Path


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            out.extend(int(p) for p in text.split())
    except OSError:
        pass
    return out


def descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = children(pid)
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return out


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def age_seconds(pid: int) -> float:
    """Seconds since the process started."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def _pidns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def lab_processes(state: Path) -> list[int]:
    """Every process of the lab under `state`: the supervisor and each host's unshare and
    init (named by their command lines), and every process in a host's PID namespace."""
    exact = b"\0" + str(state).encode() + b"\0"
    under = str(state).encode() + b"/disk/"
    me = os.getpid()
    named: list[int] = []
    pids = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) != me]
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        ours = b"gpunode_lab.supervisor" in cmdline or b"hostinit.py" in cmdline
        if ours and (exact in cmdline or under in cmdline):
            named.append(pid)
    mine = _pidns(me)
    spaces = {ns for ns in (_pidns(p) for p in named) if ns and ns != mine}
    inside = [p for p in pids if p not in named and spaces and _pidns(p) in spaces]
    return named + inside
