"""The host lock without a lab: its staleness rules (pure), its file's parsing, and its
shell commands run for real by `sh` on a folder standing in for /var/lib/gpunode."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.execute import hostlock
from gpunode.execute.hostlock import Owner, parse_owner, parse_take, stale

BOOT = "0b5c3f0e-1111-4222-8333-944455556666"
OTHER_BOOT = "7a7a7a7a-1111-4222-8333-944455556666"
ME = Owner("20261203T180000-aaaaaa", "ctl-a", 4242, "100", 1.0e9, BOOT)


def owner(**kw: object) -> Owner:
    base = {"run": "20261203T170000-bbbbbb", "controller": "ctl-a", "pid": 999999,
            "pid_start": "5", "started": 1.0e9, "boot": BOOT}  # fmt: skip
    base.update(kw)
    return Owner(**base)  # type: ignore[arg-type]


def never(pid: int, start: str) -> bool:
    return False


def always(pid: int, start: str) -> bool:
    return True


# -- the rules ----------------------------------------------------------------------------


def test_a_lock_of_this_controller_whose_process_is_gone_is_stale() -> None:
    why = stale(owner(), me=ME, host_boot=BOOT, host_uptime=10, alive=never)
    assert "pid 999999 on ctl-a" in why and "gone" in why


def test_a_lock_of_this_controller_whose_process_runs_is_kept_even_across_a_boot() -> None:
    # that run is waiting for the reboot it made: its lock is not stale
    assert stale(owner(), me=ME, host_boot=OTHER_BOOT, host_uptime=9999, alive=always) == ""


def test_another_controllers_lock_is_never_stale_by_age_alone() -> None:
    old = owner(controller="ctl-b", started=1.0)  # written in 1970, the same boot
    assert stale(old, me=ME, host_boot=BOOT, host_uptime=1e7, alive=never) == ""


def test_another_controllers_lock_from_before_a_boot_no_run_resumed_is_stale() -> None:
    held = owner(controller="ctl-b")
    why = stale(held, me=ME, host_boot=OTHER_BOOT, host_uptime=hostlock.REBOOT_GRACE,
                alive=always)  # fmt: skip
    assert BOOT in why and OTHER_BOOT in why and "no run took it back" in why


def test_a_lock_from_before_a_fresh_boot_waits_for_its_run_to_come_back() -> None:
    held = owner(controller="ctl-b")
    up = hostlock.REBOOT_GRACE - 1  # the run that rebooted it may be reconnecting now
    assert stale(held, me=ME, host_boot=OTHER_BOOT, host_uptime=up, alive=never) == ""
    assert stale(owner(controller="ctl-b", boot=""), me=ME, host_boot=OTHER_BOOT,
                 host_uptime=1e6, alive=never) == ""  # fmt: skip


def test_pid_alive_knows_this_process_a_dead_one_and_a_reused_pid() -> None:
    assert hostlock.pid_alive(os.getpid(), "")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not hostlock.pid_alive(child.pid, "")
    parent = os.getppid()
    start = hostlock.process_start(parent)
    assert start.isdigit()
    assert hostlock.pid_alive(parent, start)
    assert not hostlock.pid_alive(parent, str(int(start) + 1))  # another process, same pid


# -- parsing ------------------------------------------------------------------------------


def test_the_lock_file_parses_and_garbage_does_not() -> None:
    text = f"run=R-1\ncontroller=ctl\npid=12\npidstart=77\nstarted=1700000000.5\nboot={BOOT}\n"
    assert parse_owner(text) == Owner("R-1", "ctl", 12, "77", 1700000000.5, BOOT)
    assert parse_owner("run=R\ncontroller=c\n") is None  # no pid: a lock cut short
    assert parse_owner("run=$(reboot)\ncontroller=c\npid=1\n") is None
    odd = parse_owner("run=R\ncontroller=c\npid=1\nboot=\x1b[2J\nstarted=soon\n")
    assert odd == Owner("R", "c", 1, "", 0.0, "")


def test_a_name_with_shell_characters_is_cleaned_before_it_reaches_a_command() -> None:
    me = hostlock.this_run("x'; reboot; echo '")
    assert me.run == "x___reboot__echo__"
    assert "reboot;" not in hostlock.take_command(me)
    with pytest.raises(ValueError):
        hostlock.take_command(me, replace="abc; reboot")


def test_parse_take_reads_each_answer() -> None:
    up = f"boot-now={BOOT}\nuptime=123.45\n"
    assert parse_take(up + "lock: taken\n") == hostlock.Seen("taken", BOOT, 123.45)
    held = parse_take(up + "lock: held\ndigest=" + "a" * 64 + "\nrun=R\ncontroller=c\npid=3\n")
    assert held.status == "held" and held.digest == "a" * 64
    assert held.holder is not None and held.holder.run == "R"
    assert parse_take("").status == "unknown"
    assert parse_take("lock: unwritable\n").status == "unwritable"


# -- the commands, run by sh --------------------------------------------------------------


def sh(command: str, root: Path) -> str:
    local = command.replace("/var/lib/gpunode", str(root / "var-lib-gpunode"))
    res = subprocess.run(["sh", "-c", local], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_the_commands_take_refuse_take_over_and_release(tmp_path: Path) -> None:
    lock = tmp_path / "var-lib-gpunode" / "locks" / "apply.lock"
    first = sh(hostlock.take_command(ME), tmp_path)
    assert parse_take(first).status == "taken"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    assert stat.S_IMODE(lock.parent.stat().st_mode) == 0o700
    held = parse_owner(lock.read_text())
    real_boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert held == Owner(ME.run, ME.controller, ME.pid, ME.pid_start, ME.started, real_boot)
    assert [p.name for p in lock.parent.iterdir() if p.name.startswith(".")] == []

    other = owner(run="R-other", controller="ctl-b")
    seen = parse_take(sh(hostlock.take_command(other), tmp_path))
    assert seen.status == "held" and seen.holder is not None and seen.holder.run == ME.run
    # a takeover names exactly the lock it judged: any other lock is left alone
    wrong = parse_take(sh(hostlock.take_command(other, replace="0" * 64), tmp_path))
    assert wrong.status == "held" and parse_owner(lock.read_text()) == held
    sh(hostlock.release_command("R-other"), tmp_path)  # not its lock: kept
    assert lock.exists()
    over = parse_take(sh(hostlock.take_command(other, replace=seen.digest), tmp_path))
    assert over.status == "taken"
    now = parse_owner(lock.read_text())
    assert now is not None and now.run == "R-other"
    assert "lock: released" in sh(hostlock.release_command("R-other"), tmp_path)
    assert not lock.exists()
