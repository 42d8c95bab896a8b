from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from .sshd import SshServer, sshd


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if os.geteuid() != 0 or not shutil.which("/usr/sbin/sshd"):
        pytest.skip("needs root and OpenSSH's sshd")
    with sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
