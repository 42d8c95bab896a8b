"""The test users' sudo password holds while a second server starts from the fixture's
other import name (tests/cli imports sshd.py as `tests.transport.sshd`, this folder as
`transport.sshd`: two modules in one process)."""

from __future__ import annotations

import importlib
from pathlib import Path

from gpunode.transport.secret import Secret
from gpunode.transport.ssh import SSHTransport

from .sshd import PASS_USER, SshServer


def test_a_server_started_under_the_other_module_name_keeps_the_password(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    other = importlib.import_module("tests.transport.sshd")
    with other.sshd(tmp_path / "second") as second:
        assert second.sudo_password == ssh_server.sudo_password
    password = Secret(ssh_server.sudo_password)
    t = SSHTransport("t1", "127.0.0.1", ssh_server.settings(user=PASS_USER),
                     become_password=password)  # fmt: skip
    try:
        assert t.run("id -u", sudo=True).stdout == "0\n"  # sudo still takes the first's
    finally:
        t.close()
