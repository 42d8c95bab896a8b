from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Protocol

import pytest

from gpunode.inventory.model import SshSettings
from gpunode.transport.openssh import OpenSSHTransport
from gpunode.transport.secret import Secret
from gpunode.transport.ssh import SSHTransport

from .sshd import SshServer, sshd


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if os.geteuid() != 0 or not shutil.which("/usr/sbin/sshd"):
        pytest.skip("needs root and OpenSSH's sshd")
    with sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


Remote = SSHTransport | OpenSSHTransport


class MakeTransport(Protocol):
    kind: str

    def __call__(
        self,
        name: str,
        address: str,
        settings: SshSettings,
        *,
        become_password: Secret | None = None,
    ) -> Remote: ...


@pytest.fixture(params=["paramiko", "openssh"])
def make_transport(request: pytest.FixtureRequest) -> Iterator[MakeTransport]:
    """Makes transports of one kind (the test runs once per kind); closes them after."""
    kind: str = request.param
    made: list[Remote] = []

    class Make:
        def __init__(self) -> None:
            self.kind = kind

        def __call__(
            self,
            name: str,
            address: str,
            settings: SshSettings,
            *,
            become_password: Secret | None = None,
        ) -> Remote:
            cls = SSHTransport if kind == "paramiko" else OpenSSHTransport
            t = cls(name, address, settings, become_password=become_password)
            made.append(t)
            return t

    yield Make()
    for t in made:
        t.close()
