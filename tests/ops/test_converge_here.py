"""file, line_in_file and command for real, without root: each task is read with gpunode's
own facts script and probes on this machine, its steps run as this user on files under a
temporary directory, and the host is read again: the files hold what the task says, and
the second plan is empty."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path
from typing import Any

from gpunode.changes import Change
from gpunode.execute.readhost import read_host
from gpunode.roles.ops import OPERATIONS, OpContext
from gpunode.transport.local import LocalTransport

ME = f"{pwd.getpwuid(os.getuid()).pw_name}:{grp.getgrgid(os.getgid()).gr_name}"


def plan(op_name: str, raw: dict[str, Any]) -> list[Change]:
    op = OPERATIONS[op_name]
    args = op.parse(raw)
    facts, probes = read_host(LocalTransport(), files=op.paths(args), probes=op.probes(args))
    return op.plan(args, OpContext("site", "task", facts, probes=probes))


def apply(changes: list[Change]) -> None:
    t = LocalTransport()
    for change in changes:
        for step in change.steps:
            res = t.run(step.command, stdin=None if step.stdin is None else step.stdin.encode())
            assert res.ok, (step.command, res.stderr)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_file_is_written_corrected_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "site" / "app.conf"
    task = {"path": str(path), "content": "a = 1\n", "mode": "0640", "owner": ME}
    first = plan("file", task)
    assert [c.reason for c in first] == [f"{path} missing"]
    apply(first)
    assert (path.read_text(), mode(path)) == ("a = 1\n", 0o640)
    assert plan("file", task) == []

    path.chmod(0o666)
    fix = plan("file", task)
    assert [c.commands for c in fix] == [[f"chmod 0640 {path}"]]
    apply(fix)
    assert mode(path) == 0o640 and plan("file", task) == []

    path.write_text("a = 2\n")
    apply(plan("file", task))
    assert path.read_text() == "a = 1\n" and plan("file", task) == []

    gone = {"path": str(path), "state": "absent"}
    apply(plan("file", gone))
    assert not path.exists() and plan("file", gone) == []


def test_line_in_file_appends_once_after_a_missing_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "modules"
    path.write_text("nvidia")  # no final newline
    task = {"path": str(path), "line": "nvidia-uvm # and $HOME"}
    apply(plan("line_in_file", task))
    assert path.read_text() == "nvidia\nnvidia-uvm # and $HOME\n"
    assert plan("line_in_file", task) == []

    fresh = {"path": str(tmp_path / "new" / "dir" / "file"), "line": "x=1"}
    apply(plan("line_in_file", fresh))
    assert (tmp_path / "new" / "dir" / "file").read_text() == "x=1\n"
    assert plan("line_in_file", fresh) == []


def test_command_runs_until_its_guard_holds(tmp_path: Path) -> None:
    log, stamp = tmp_path / "log", tmp_path / "stamp dir" / "stamp"
    script = f'echo ran >> \'{log}\'; mkdir -p "$(dirname "$0")"; touch "$0"'
    made = {"cmd": ["sh", "-c", script, str(stamp)], "creates": str(stamp), "sudo": False}
    apply(plan("command", made))
    assert stamp.exists() and plan("command", made) == []

    marked = {"cmd": f"echo done >> '{log}'", "unless": f"grep -qx done '{log}'"}
    apply(plan("command", marked))
    assert plan("command", marked) == []
    assert log.read_text() == "ran\ndone\n"  # each ran once
