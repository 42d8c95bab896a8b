"""`become: none` is honoured: a login user who is not root gets every change refused
before the first one (nothing half-done)."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

import pytest

from tests.apply.labhelpers import Lab, apply, of, on_host, wait_for_ssh

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_become_none_as_a_user_refuses_every_change_before_the_first(
    lab: Lab, tmp_path: Path
) -> None:
    assert lab.gpunode("lab", "reset", "lab-02").returncode == 0
    wait_for_ssh(lab, "lab-02")
    inv = lab.inventory(tmp_path, driver=None, cuda=None, cudnn=None, nccl=None, cuda_env=True,
                        smoke=[])  # fmt: skip
    inv.write_text(inv.read_text().replace("become: sudo", "become: none"))
    before = lab.tree("lab-02")
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 2
    (done,) = of(evs, "host-finished", "lab-02")
    assert done["status"] == "failed"
    assert "become: none, and ubuntu is not root: 2 change(s) need root" in done["message"]
    assert of(evs, "change-started") == []
    assert lab.tree("lab-02") == before  # nothing was written
    found = on_host(inv, "lab-02", "ls /etc/profile.d /etc/ld.so.conf.d")
    assert "gpunode" not in found


@pytest.mark.parametrize("transport", ["paramiko", "openssh"])
def test_requiretty_without_a_password_sends_stdin_once_the_command_runs(
    lab: Lab, tmp_path: Path, transport: str
) -> None:
    """Passwordless sudo under `Defaults requiretty`: nothing is exchanged before the
    command starts, yet its stdin waits for sudo's start marker. Sent earlier, the terminal
    would echo it and sudo's relay would take its ^D: the command would never end."""
    from gpunode.inventory import load
    from gpunode.transport.connect import open_transport

    host = "lab-02"
    assert lab.gpunode("lab", "reset", host).returncode == 0
    wait_for_ssh(lab, host)
    inv = lab.inventory(tmp_path, {"transport": transport}, driver=None, cuda=None, cudnn=None,
                        nccl=None, smoke=[])  # fmt: skip
    rule = "printf 'Defaults requiretty\\n' > /etc/sudoers.d/zz-requiretty"
    on_host(inv, host, f"sudo -n sh -c {shlex.quote(rule)}")
    try:
        assert "you must have a tty" in on_host(inv, host, "sudo -n true 2>&1 || true")
        t = open_transport(load(inv).hosts[host])
        assert t.settings.transport == transport
        t.connect()
        try:
            blob = bytes(range(256)) * 16 + b"x" * 5000 + b"\x04\x03 end"
            res = t.run("sha256sum; id -u", sudo=True, stdin=blob, timeout=30)
            assert res.ok, res
            assert res.stdout.split() == [hashlib.sha256(blob).hexdigest(), "-", "0"], res
            # the host's later commands go to a terminal at once
            res = t.run("cat /etc/sudoers.d/zz-requiretty", sudo=True, timeout=30)
            assert res.stdout == "Defaults requiretty\n", res
        finally:
            t.close()
    finally:
        assert lab.gpunode("lab", "reset", host).returncode == 0
        wait_for_ssh(lab, host)
