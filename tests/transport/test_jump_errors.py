"""A jump host's own failure reaches the user, named as the hop's: OpenSSH sends a
persisting master's ProxyJump stderr to /dev/null, so the openssh transport asks the hop
again. Two real sshds (the target, the bastion); the hop's key is left out of the
known_hosts the ssh config gives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.transport.base import HostKeyError
from gpunode.transport.openssh import OpenSSHTransport

from .sshd import NOPASS_USER, SshServer
from .test_openssh import bastion  # noqa: F401  (the second sshd, a module fixture)


def test_a_jump_hosts_unknown_key_is_named_as_the_hops(
    ssh_server: SshServer,
    bastion: SshServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(ssh_server.known_hosts.read_text())  # the target's key; not the bastion's
    cfg = tmp_path / "config"
    cfg.write_text(
        f"Host *\n  IdentityFile {ssh_server.client_key}\n  UserKnownHostsFile {kh}\n"
        "  StrictHostKeyChecking yes\n  BatchMode yes\n"
    )
    hop = f"{NOPASS_USER}@127.0.0.1:{bastion.port}"
    s = ssh_server.settings(config_file=str(cfg), known_hosts_file=str(kh), proxy_jump=hop)
    t = OpenSSHTransport("behind", "127.0.0.1", s)
    try:
        with pytest.raises(HostKeyError) as caught:
            t.run(["true"])
    finally:
        t.close()
    message = str(caught.value)
    assert message.startswith(f"jump host {hop}: No ED25519 host key is known for "
                              f"[127.0.0.1]:{bastion.port}")  # fmt: skip
    assert "Host key verification failed" in message
    assert f"reads the ssh config {cfg} alone" in message and "UserKnownHostsFile" in message
    assert "kex_exchange_identification" not in message  # the master's words, not the cause
