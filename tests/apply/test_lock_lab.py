"""The host lock and the inventory lock, through the CLI on lab hosts: two applies at once,
stale locks taken over, a live one refused, and no lock left after a run (failed or not).
What a run did is read from the host itself: its lock file, a file each change appends
to, and the lab's boot counter."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpunode.execute import hostlock
from gpunode.exitcodes import ExitCode
from tests.apply.labhelpers import Lab, events, fresh, of
from tests.conftest import until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
RAN = "/var/lib/gpunode-lock-test.ran"
NOTHING: dict[str, Any] = {"driver": None, "cuda": None, "cudnn": None, "nccl": None,
                           "cuda_env": False, "smoke": []}  # fmt: skip


def counted(name: str, seconds: int, when: str = "") -> str:
    """A change that appends a line to RAN each time it runs, then takes `seconds`."""
    return (
        f"- name: {name}\n  op: command\n"
        f'  cmd: "echo {name} >> {RAN}; sleep {seconds}; touch {RAN}.{name}"\n'
        f"  creates: {RAN}.{name}\n" + (f'  when: "{when}"\n' if when else "")
    )


def inventory(lab: Lab, folder: Path, tasks: str) -> Path:
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(lab.inventory_text)
    doc["defaults"]["stack"].update({**NOTHING, "roles": ["locktest"]})
    (folder / "roles" / "locktest").mkdir(parents=True)
    (folder / "roles" / "locktest" / "tasks.yaml").write_text(tasks)
    path = folder / "inventory.yaml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def as_root(inv: Path, command: str) -> str:
    """Run `command` on HOST as root (sudo), the test's own view of the host."""
    from gpunode.inventory import load
    from gpunode.transport.connect import open_transport

    t = open_transport(load(inv).hosts[HOST])
    t.connect()
    try:
        res = t.run(["sh", "-c", command], sudo=True, timeout=60)
    finally:
        t.close()
    assert res.ok, res.stderr
    return res.stdout


def lock_on_host(inv: Path) -> str:
    return as_root(inv, f"cat {hostlock.LOCK_PATH} 2>/dev/null || true")


def ran(inv: Path) -> list[str]:
    return as_root(inv, f"cat {RAN} 2>/dev/null || true").split()


def boots(lab: Lab) -> int:
    doc = json.loads(lab.gpunode("lab", "status", "--json").stdout)
    return int({h["name"]: h for h in doc["hosts"]}[HOST]["boots"])


def apply(lab: Lab, inv: Path) -> subprocess.CompletedProcess[str]:
    return lab.gpunode("apply", str(inv), "-l", HOST, "--yes", "--json", timeout=240)


def start(lab: Lab, inv: Path, out: Path) -> subprocess.Popen[bytes]:
    """apply in the background, its stdout and stderr into files (never a full pipe)."""
    with (out / "stdout").open("wb") as so, (out / "stderr").open("wb") as se:
        return subprocess.Popen(
            [sys.executable, "-m", "gpunode", "apply", str(inv), "-l", HOST, "--yes", "--json"],
            env=lab.env, stdout=so, stderr=se,
        )  # fmt: skip


def finished(stdout: str) -> tuple[str, str]:
    done = of(events(stdout), "host-finished", HOST)
    assert len(done) == 1, stdout[-2000:]
    return done[0]["status"], done[0]["message"]


def test_two_applies_at_once_the_second_is_refused_and_each_change_happens_once(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    boot0, boots0 = lab.boot_id(HOST), boots(lab)
    # a change, one reboot (only from the first boot), a change after the reboot
    tasks = (
        counted("before", 6)
        + f"- name: reboot once\n  op: reboot\n  reason: the test asks for one\n"
        f"  when: \"facts.boot_id == '{boot0}'\"\n"
        + counted("after", 12, when=f"facts.boot_id != '{boot0}'")
    )
    first_inv = inventory(lab, tmp_path / "first", tasks)
    other_inv = inventory(lab, tmp_path / "other", tasks)  # the same hosts, another file
    first = start(lab, first_inv, tmp_path)
    try:
        until(lambda: lock_on_host(first_inv), 60, "the first run's lock on the host")
        holder = hostlock.parse_owner(lock_on_host(first_inv))
        assert holder is not None and holder.pid == first.pid and holder.boot == boot0
        assert holder.controller == hostlock.controller_name()
        run_file = Path(lab.env["GPUNODE_STATE_DIR"]) / "runs" / f"{holder.run}.json"
        assert json.loads(run_file.read_text())["status"] == "running"

        # the same inventory on the same controller: refused at once, naming the pid
        t0 = time.monotonic()
        same = apply(lab, first_inv)
        assert same.returncode == ExitCode.LOCKED, same.stderr
        assert f"pid {first.pid}" in same.stderr and time.monotonic() - t0 < 15
        assert f"run {holder.run}" in same.stderr
        assert same.stdout == ""

        # another inventory naming the host: the host's lock refuses it
        other = apply(lab, other_inv)
        assert other.returncode == ExitCode.LOCKED, other.stderr
        status, message = finished(other.stdout)
        assert status == "failed" and f"run {holder.run} " in message, message
        assert f"pid {first.pid}" in message and hostlock.CLEAR in message

        # after its reboot the first run keeps the host: its lock now says the new boot
        def relocked() -> bool:
            try:
                now = hostlock.parse_owner(lock_on_host(first_inv))
            except Exception:  # rebooting: refused, or cut mid-login (paramiko's EOFError)
                return False
            return now is not None and now.run == holder.run and now.boot != boot0

        until(relocked, 120, "the first run's lock with the new boot id")
        again = apply(lab, other_inv)
        assert again.returncode == ExitCode.LOCKED, again.stderr
        assert f"run {holder.run} " in finished(again.stdout)[1]
        first.wait(timeout=240)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, (tmp_path / "stderr").read_text()[-3000:]
    assert finished((tmp_path / "stdout").read_text())[0] == "changed"
    assert lock_on_host(first_inv) == ""  # given back
    assert ran(first_inv) == ["before", "after"]  # each change made once, by the first run
    assert boots(lab) == boots0 + 1  # one reboot
    last = apply(lab, other_inv)  # the host free again: converged, nothing to do
    assert last.returncode == 0, last.stderr
    assert of(events(last.stdout), "change-started") == []
    assert ran(first_inv) == ["before", "after"] and boots(lab) == boots0 + 1
    assert lock_on_host(first_inv) == ""


def write_lock(inv: Path, text: str) -> None:
    as_root(inv, f"mkdir -p -m 700 {hostlock.LOCK_DIR} && umask 077 && "
                 f"printf %s '{text}' > {hostlock.LOCK_PATH}")  # fmt: skip


def test_stale_locks_are_taken_over_a_live_one_refuses_and_no_run_leaves_one(
    lab: Lab, tmp_path: Path
) -> None:
    inv = inventory(lab, tmp_path / "inv", counted("one", 0))
    as_root(inv, f"rm -f {RAN} {RAN}.one")
    boot = as_root(inv, "cat /proc/sys/kernel/random/boot_id").strip()
    uptime = float(as_root(inv, "cut -d' ' -f1 /proc/uptime"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me = socket.gethostname()

    # this controller's run whose process is gone
    write_lock(inv, f"run=R-dead\ncontroller={me}\npid={dead.pid}\nstarted=1.0\nboot={boot}\n")
    res = apply(lab, inv)
    assert res.returncode == 0, res.stderr
    notes = [e["detail"] for e in of(events(res.stdout), "host-status", HOST) if e["detail"]]
    assert any(f"took over the stale lock of run R-dead (controller {me}, pid {dead.pid}" in n
               and "is gone" in n for n in notes), notes  # fmt: skip
    assert ran(inv) == ["one"] and lock_on_host(inv) == ""

    # another controller's run that no run resumed after a boot
    old = "00000000-0000-4000-8000-000000000000"
    write_lock(inv, f"run=R-old\ncontroller=elsewhere\npid=7\nstarted=1.0\nboot={old}\n")
    res = apply(lab, inv)
    if uptime >= hostlock.REBOOT_GRACE:
        assert res.returncode == 0, res.stderr
        assert "took over the stale lock of run R-old" in res.stdout
        assert lock_on_host(inv) == ""
    else:  # booted moments ago: the run that rebooted it may still be coming back
        assert res.returncode == ExitCode.LOCKED, res.stderr
        as_root(inv, hostlock.CLEAR.removeprefix("sudo "))

    # another controller's run on this boot: refused, however old; nothing changed
    as_root(inv, f"rm -f {RAN}.one")
    live = f"run=R-live\ncontroller=elsewhere\npid=4242\nstarted=1000.0\nboot={boot}\n"
    write_lock(inv, live)
    res = apply(lab, inv)
    assert res.returncode == ExitCode.LOCKED, res.stderr
    status, message = finished(res.stdout)
    assert status == "failed"
    assert "run R-live (controller elsewhere, pid 4242, since 1970-01-01 00:16:40 UTC)" in message
    assert hostlock.CLEAR in message
    assert lock_on_host(inv) == live and ran(inv) == ["one"]  # its lock kept, no change made
    as_root(inv, hostlock.CLEAR.removeprefix("sudo "))  # what the message tells the admin

    # the lock is given back after a failed run too
    failing = inventory(
        lab,
        tmp_path / "failing",
        "- name: fails\n  op: command\n  cmd: exit 3\n  creates: /nonexistent\n",
    )
    res = apply(lab, failing)
    assert res.returncode == ExitCode.FAILED, res.stderr
    assert finished(res.stdout)[0] == "failed"
    assert lock_on_host(inv) == ""


def test_a_killed_apply_leaves_its_lock_and_the_next_apply_takes_it_over(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)  # no journal entry of an earlier test's failed change
    inv = inventory(lab, tmp_path / "inv", counted("slow", 15))
    killed = start(lab, inv, tmp_path)
    try:
        until(lambda: ran(inv) == ["slow"] or killed.poll() is not None, 60, "the change")
        assert killed.poll() is None, (tmp_path / "stdout").read_text()[-2000:]
    finally:
        killed.kill()  # SIGKILL: no finally of its own runs
        killed.wait()
    held = hostlock.parse_owner(lock_on_host(inv))
    assert held is not None and held.pid == killed.pid  # left behind by the dead run
    res = apply(lab, inv)
    assert res.returncode == 0, res.stderr
    assert f"took over the stale lock of run {held.run} " in res.stdout
    assert f"its controller process (pid {killed.pid} on {held.controller}) is gone" in res.stdout
    assert lock_on_host(inv) == "" and ran(inv) == ["slow", "slow"]  # the cut change ran again
