"""`up` twice, `down` after a crash, sudo with a password, and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.views.schemas import validate
from gpunode_lab import procs
from gpunode_lab.lifecycle import mounts_under
from gpunode_lab.state import net_address
from tests.conftest import gpunode_lab, lab_unavailable, slot_net, slot_path, until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STATE = slot_path("/var/lib/gpunode-lab-test-lifecycle")
NET = slot_net(2)  # its own addresses: 127.0.2.X, beside the session's lab


@pytest.fixture
def own_lab():
    reason = lab_unavailable()
    if reason:
        pytest.skip(reason)
    gpunode_lab(STATE, "down", check=False)
    yield STATE
    gpunode_lab(STATE, "down", check=False)


def _status(state):
    out = gpunode_lab(state, "status", "--json").stdout
    validate("lab-status", out)  # the envelope and fields docs/schemas/lab-status.json has
    return json.loads(out)


def _assert_nothing_left(state: Path) -> None:
    assert not state.exists()
    assert mounts_under(state) == []
    assert procs.lab_processes(state) == []
    text = Path("/proc/self/mountinfo").read_text()
    assert str(state) not in text


def test_up_twice_keeps_the_lab_and_down_cleans(own_lab):
    gpunode_lab(own_lab, "up", "--hosts", "2", "--net", str(NET))
    first = {h["name"]: h["boot_id"] for h in _status(own_lab)["hosts"]}
    out = gpunode_lab(own_lab, "up", "--hosts", "2", "--net", str(NET))
    assert "already up" in out.stderr
    assert {h["name"]: h["boot_id"] for h in _status(own_lab)["hosts"]} == first
    gpunode_lab(own_lab, "down")
    _assert_nothing_left(own_lab)


def test_down_after_kill_9_of_everything(own_lab):
    gpunode_lab(own_lab, "up", "--hosts", "3", "--net", str(NET))
    gpunode_lab(own_lab, "fault", "lab-01", "latency", "50")
    gpunode_lab(own_lab, "fault", "lab-02", "disk-full")
    pids = procs.lab_processes(own_lab)
    assert len(pids) >= 7  # supervisor, and per host: unshare, init, sshd
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    until(lambda: gpunode_lab(own_lab, "status", check=False).returncode == 1, 10,
          "status reports the lab down")  # fmt: skip
    gpunode_lab(own_lab, "down")
    _assert_nothing_left(own_lab)


def test_up_after_a_crash_starts_afresh(own_lab):
    gpunode_lab(own_lab, "up", "--hosts", "2", "--net", str(NET))
    pid = int((own_lab / "supervisor.pid").read_text())
    os.kill(pid, signal.SIGKILL)  # the hosts die with their supervisor
    until(lambda: procs.lab_processes(own_lab) == [], 10, "the lab's processes are gone")
    gpunode_lab(own_lab, "up", "--hosts", "2", "--net", str(NET))
    assert all(h["state"] == "up" for h in _status(own_lab)["hosts"])


def test_sudo_with_a_password(own_lab):
    secret = "lab-sudo-Secret-42"
    env = {"GPUNODE_LAB_SUDO": secret}
    gpunode_lab(
        own_lab,
        "up",
        "--hosts",
        "1",
        "--net",
        str(NET),
        "--sudo-password-env",
        "GPUNODE_LAB_SUDO",
        env=env,
    )
    inventory = gpunode_lab(own_lab, "inventory").stdout
    assert 'become_password_env: "GPUNODE_LAB_SUDO"' in inventory
    assert secret not in inventory
    assert secret not in (own_lab / "lab.json").read_text()
    ssh = [
        "ssh",
        "-i",
        str(own_lab / "client/id_ed25519"),
        "-o",
        f"UserKnownHostsFile={own_lab / 'client/known_hosts'}",
        "-o",
        "BatchMode=yes",
        "-F",
        "/dev/null",
        f"ubuntu@{net_address(NET, 11)}",
    ]
    no_pw = subprocess.run([*ssh, "sudo -n true"], capture_output=True, text=True, timeout=30)
    assert no_pw.returncode == 1 and "password is required" in no_pw.stderr
    ok = subprocess.run(
        [*ssh, "sudo -S -p '' id -u"],
        input=secret + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ok.stdout.strip() == "0"
    bad = subprocess.run(
        [*ssh, "sudo -S -p '' id -u"], input="wrong\n", capture_output=True, text=True, timeout=30
    )
    assert bad.returncode != 0


@pytest.mark.parametrize("command", [["up"], ["down"], ["status"], ["fault", "lab-01", "stall"]])
def test_not_root_is_a_clear_error(monkeypatch, command):
    from click.testing import CliRunner

    from gpunode_lab.cli import lab

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("GPUNODE_LAB_DIR", "/nonexistent")
    result = CliRunner().invoke(lab, command)
    assert result.exit_code == 5
    assert "needs root" in result.output


def test_not_linux_is_a_clear_error(monkeypatch):
    from click.testing import CliRunner

    from gpunode_lab.cli import lab

    monkeypatch.setattr(sys, "platform", "darwin")
    result = CliRunner().invoke(lab, ["up"])
    assert result.exit_code == 5
    assert "needs Linux" in result.output
