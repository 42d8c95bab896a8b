"""A private lab for the apply tests: real sshd hosts, sudo, apt and dpkg (root, Linux)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.apply.labhelpers import NET, PORT, Lab, start_lab


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    args = ("--hosts", "2", "--ubuntu", "22.04", "--net", str(NET), "--port", str(PORT))
    yield from start_lab(tmp_path_factory, *args)
