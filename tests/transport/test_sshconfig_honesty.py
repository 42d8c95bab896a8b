"""The paramiko transport says what of an ssh config it does not read, instead of failing
as if the host did not exist; and both transports read the same config (`~` is the login's
home from the password database, as OpenSSH expands it, whatever $HOME says)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from gpunode.inventory.model import SshSettings
from gpunode.transport.base import HostUnreachableError
from gpunode.transport.ssh import SSHTransport
from gpunode.transport.sshcli import home_path
from gpunode.transport.sshconfig import unread

from .sshd import PASS_USER, SshServer


def test_what_paramiko_does_not_read_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(
        "# ProxyCommand in a comment is no keyword\n"
        "Include ~/.ssh/conf.d/*\n"
        "Host a\n  HostName 10.0.0.1\n  ProxyCommand ssh -W %h:%p bastion\n"
        "  certificatefile ~/.ssh/id_ed25519-cert.pub\n"
        "Match host b localnetwork 10.0.0.0/8\n  User admin\n"
        "Match host c exec true\n  User admin\n"  # paramiko reads this Match
        "Host d\n  ProxyCommand=nc %h %p\n"
    )
    assert unread(str(cfg)) == ["Include", "ProxyCommand", "CertificateFile", "Match localnetwork"]
    assert unread(str(tmp_path / "missing")) == [] and unread(None) == []


def test_a_host_defined_in_an_include_fails_saying_to_use_openssh(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "nodes").write_text(
        f"Host gpu-included\n  HostName 127.0.0.1\n  Port {ssh_server.port}\n  User {PASS_USER}\n"
    )
    cfg = tmp_path / "config"
    cfg.write_text(f"Include {tmp_path}/conf.d/*\n")
    s = SshSettings.model_validate({"config_file": str(cfg), "connect_timeout": 5.0})
    with pytest.raises(HostUnreachableError) as caught:
        SSHTransport("inc", "gpu-included", s).connect()
    message = str(caught.value)
    assert message.startswith("cannot connect to gpu-included:22: ")  # as before: not found
    assert message.endswith(
        f"; the ssh config {cfg} uses Include, which the paramiko transport does not read: "
        "set ssh.transport: openssh"
    )


def test_tilde_is_the_logins_home_not_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # as `sudo -E` leaves it
    login_home = pwd.getpwuid(os.getuid()).pw_dir
    assert home_path("~/.ssh/config") == f"{login_home}/.ssh/config"
    assert home_path("/etc/ssh/ssh_config") == "/etc/ssh/ssh_config"
