"""How a managed file is written: into a fresh mktemp name beside it under umask 077, given
its owner and mode, then renamed over it. The step is run here for real (root, Linux):
a symlink planted at the old fixed temporary name, or at the target itself, is never
written through, and a private file is never readable by others on the way."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.roles.ops.apt import write_file_step

needs_root = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0, reason="runs the step as root, on Linux"
)


def run(step_command: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", step_command], input=stdin, capture_output=True, text=True)


def test_the_step_writes_privately_then_renames() -> None:
    step = write_file_step("/etc/site/secret", "s3cret\n", "0600", "root:adm")
    cmd = step.command
    assert step.stdin == "s3cret\n"
    assert ".gpunode-new" not in cmd
    # umask before the temporary file exists; mktemp's own name (O_EXCL), in the same directory
    assert cmd.index("umask 077") < cmd.index("mktemp")
    assert "tmp=$(mktemp -- /etc/site/.secret.XXXXXX)" in cmd
    # owner and mode on the temporary file, before it takes the target's name; no symlink
    # at the target is followed (-T), and a failure removes the temporary file
    chown, chmod, mv = (cmd.index(w) for w in ('chown -h -- root:adm "$tmp"',
                                                'chmod -- 0600 "$tmp"',
                                                'mv -fT -- "$tmp" /etc/site/secret'))  # fmt: skip
    assert cmd.index('cat > "$tmp"') < chown < chmod < mv
    assert 'rm -f -- "$tmp"' in cmd
    assert shlex.split(cmd)  # one well-formed shell command


@needs_root
def test_a_symlink_at_the_old_temporary_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "shadow"
    victim.write_text("root:$6$hash:19000::::::\n")
    victim.chmod(0o600)
    drop = tmp_path / "drop"
    drop.mkdir()
    drop.chmod(0o1777)  # world-writable and sticky, as /tmp
    target = drop / "secret"
    (drop / "secret.gpunode-new").symlink_to(victim)
    res = run(write_file_step(str(target), "s3cret\n", "0600").command, "s3cret\n")
    assert res.returncode == 0, res.stderr
    assert victim.read_text() == "root:$6$hash:19000::::::\n"
    assert os.readlink(drop / "secret.gpunode-new") == str(victim)
    st = target.lstat()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert (st.st_uid, target.read_text()) == (0, "s3cret\n")
    assert sorted(p.name for p in drop.iterdir()) == ["secret", "secret.gpunode-new"]


@needs_root
def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "shadow"
    victim.write_text("keep\n")
    target = tmp_path / "secret"
    target.symlink_to(victim)
    res = run(write_file_step(str(target), "new\n", "0640").command, "new\n")
    assert res.returncode == 0, res.stderr
    assert victim.read_text() == "keep\n"
    assert not target.is_symlink() and target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


@needs_root
def test_a_failed_write_leaves_the_target_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "conf"
    target.write_text("old\n")
    res = run(write_file_step(str(target), "new\n", "0644", "no-such-user-x").command, "new\n")
    assert res.returncode != 0
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf"]


@needs_root
def test_the_directory_is_made_with_the_usual_mode(tmp_path: Path) -> None:
    target = tmp_path / "new" / "dir" / "conf"
    old = os.umask(0o022)
    try:
        res = run(write_file_step(str(target), "x\n", "0644").command, "x\n")
    finally:
        os.umask(old)
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE((tmp_path / "new" / "dir").stat().st_mode) == 0o755
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
