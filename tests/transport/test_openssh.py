"""What only the openssh transport does: Include, host certificates, OpenSSH's own
known_hosts handling; and a bastion hop (ProxyJump through a second sshd) with both."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunode.inventory.model import SshSettings
from gpunode.transport.base import HostKeyError, HostUnreachableError
from gpunode.transport.openssh import OpenSSHTransport
from gpunode.transport.ssh import SSHTransport

from .conftest import MakeTransport
from .sshd import NOPASS_USER, PASS_USER, SshServer, sshd


def _keygen(path: Path) -> str:
    """A fresh ed25519 key pair at `path`; returns "ssh-ed25519 AAAA..."."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


def _fingerprint(pub: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True)
    return out.stdout.split()[1]


@pytest.fixture(scope="module")
def bastion(ssh_server: SshServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A second sshd, for the same test users: the jump host."""
    with sshd(tmp_path_factory.mktemp("bastion"), users_of=ssh_server) as server:
        yield server


def test_host_defined_only_in_an_included_file(ssh_server: SshServer, tmp_path: Path) -> None:
    """~/.ssh/conf.d-style: the alias, its address, port, user and known_hosts file live in
    an Included file; the inventory names only the alias and the config."""
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "nodes").write_text(
        "Host gpu-included\n  HostName 127.0.0.1\n"
        f"  Port {ssh_server.port}\n  User {PASS_USER}\n"
        f"  IdentityFile {ssh_server.client_key}\n"
        f"  UserKnownHostsFile {ssh_server.known_hosts}\n"
    )
    cfg = tmp_path / "config"
    cfg.write_text(f"Include {tmp_path}/conf.d/*\n")
    s = SshSettings.model_validate({"config_file": str(cfg), "connect_timeout": 5.0})
    t = OpenSSHTransport("inc", "gpu-included", s)
    try:
        assert t.run(["id", "-un"]).stdout.strip() == PASS_USER  # the Included User
        assert t.run("echo $SSH_CONNECTION").stdout.split()[3] == str(ssh_server.port)
    finally:
        t.close()
    # paramiko reads no Include: the alias is not a host it can find
    p = SSHTransport("inc", "gpu-included", s)
    with pytest.raises(HostUnreachableError):
        p.connect()


def test_bastion_hop_through_a_second_sshd(
    ssh_server: SshServer, bastion: SshServer, make_transport: MakeTransport, tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(ssh_server.known_hosts.read_text() + bastion.known_hosts.read_text())
    # The hop is a second ssh that OpenSSH starts with the config file (-F), not gpunode's
    # options: the config gives it its key and known_hosts, as an admin's config would.
    cfg = tmp_path / "config"
    cfg.write_text(
        f"Host *\n  IdentityFile {ssh_server.client_key}\n  UserKnownHostsFile {kh}\n"
        "  StrictHostKeyChecking yes\n  BatchMode yes\n"
    )
    s = ssh_server.settings(
        config_file=str(cfg),
        known_hosts_file=str(kh),
        proxy_jump=f"{NOPASS_USER}@127.0.0.1:{bastion.port}",
    )
    hop_log = len(bastion.log.read_text(errors="replace"))
    before = ssh_server.accepted()
    t = make_transport("behind", "127.0.0.1", s)
    assert t.run(["id", "-un"]).stdout.strip() == NOPASS_USER
    assert t.run(["true"]).exit_code == 0
    t.close()
    assert ssh_server.accepted_since(before, 1) == 1
    # the bastion logged the login and the forwarded connection to the target's port
    deadline = time.monotonic() + 10
    while f"port {ssh_server.port}" not in bastion.log.read_text(errors="replace")[hop_log:]:
        assert time.monotonic() < deadline, bastion.log.read_text(errors="replace")[hop_log:]
        time.sleep(0.05)
    log = bastion.log.read_text(errors="replace")[hop_log:]
    assert f"Accepted publickey for {NOPASS_USER}" in log
    assert f"target 127.0.0.1 port {ssh_server.port}" in log


def test_host_certificate_trusted_through_a_cert_authority_line(
    ssh_server: SshServer, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    ca = tmp_path / "host_ca"
    ca_pub = _keygen(ca)
    with sshd(tmp_path_factory.mktemp("certified"), users_of=ssh_server, host_ca=ca) as server:
        kh = tmp_path / "known_hosts"
        kh.write_text(f"@cert-authority [127.0.0.1]:{server.port} {ca_pub}\n")  # no plain key
        t = OpenSSHTransport("cert", "127.0.0.1", server.settings(known_hosts_file=str(kh)))
        try:
            assert server.settings().host_key_policy == "strict"
            assert t.run(["id", "-un"]).stdout.strip() == NOPASS_USER
        finally:
            t.close()
        assert kh.read_text() == f"@cert-authority [127.0.0.1]:{server.port} {ca_pub}\n"
        # a certificate from a CA that is not trusted: refused, nothing recorded
        other = _keygen(tmp_path / "other_ca")
        kh.write_text(f"@cert-authority [127.0.0.1]:{server.port} {other}\n")
        t = OpenSSHTransport("cert", "127.0.0.1", server.settings(known_hosts_file=str(kh)))
        with pytest.raises(HostKeyError):
            t.connect()
        t.close()
        assert kh.read_text() == f"@cert-authority [127.0.0.1]:{server.port} {other}\n"


def test_changed_host_key_exits_5_through_gpunode_facts(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{ssh_server.port} {_keygen(tmp_path / 'impostor')}\n")
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "defaults:\n  ssh:\n"
        f"    transport: openssh\n    user: {NOPASS_USER}\n    port: {ssh_server.port}\n"
        f"    identity_file: {ssh_server.client_key}\n    known_hosts_file: {kh}\n"
        "    config_file: null\n    connect_timeout: 5\n"
        "hosts:\n  moved: {address: 127.0.0.1}\n"
    )
    before = ssh_server.accepted()
    res = subprocess.run([sys.executable, "-m", "gpunode", "facts", str(inv), "--json"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 6, res.stderr
    host = json.loads(res.stdout)["hosts"]["moved"]
    assert host["status"] == "hostkey-changed"
    offered = _fingerprint(ssh_server.dir / "ssh_host_ed25519_key.pub")
    assert host["error"].startswith(f"host key changed for [127.0.0.1]:{ssh_server.port}")
    assert offered in host["error"]
    assert _fingerprint(tmp_path / "impostor.pub") in host["error"]  # the known one
    assert f"{kh}:1" in host["error"]
    assert ssh_server.accepted_since(before, 1, timeout=0.5) == 0  # refused before login


def _master_pid(t: OpenSSHTransport, server: SshServer) -> int:
    """The master's pid, as `ssh -O check` on the transport's control socket reports it."""
    assert t._dir is not None
    check = subprocess.run(
        ["ssh", "-o", f"ControlPath={t._dir}/%C", "-O", "check", "-p", str(server.port),
         "-l", NOPASS_USER, "127.0.0.1"],
        capture_output=True, text=True, timeout=10,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    return int(check.stderr.split("pid=")[1].split(")")[0])


def _gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid):
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]
    except (OSError, IndexError):
        return "zombie"


def test_close_stops_the_master(ssh_server: SshServer) -> None:
    t = OpenSSHTransport("t1", "127.0.0.1", ssh_server.settings())
    t.connect()
    assert t._dir is not None
    control = Path(t._dir)
    assert oct(control.stat().st_mode & 0o777) == "0o700"
    pid = _master_pid(t, ssh_server)
    assert Path(f"/proc/{pid}").exists()
    t.close()
    _gone(pid)
    assert not control.exists()


def test_a_killed_master_is_replaced_by_a_new_login(ssh_server: SshServer) -> None:
    import os
    import signal

    before = ssh_server.accepted()
    t = OpenSSHTransport("t1", "127.0.0.1", ssh_server.settings())
    try:
        assert t.run(["echo", "1"]).stdout == "1\n"
        pid = _master_pid(t, ssh_server)
        os.kill(pid, signal.SIGKILL)  # its socket stays behind, stale
        _gone(pid)
        assert t.run(["echo", "2"]).stdout == "2\n"
        assert t.connections_opened == 2
        assert _master_pid(t, ssh_server) != pid
    finally:
        t.close()
    assert ssh_server.accepted_since(before, 2) == 2
