"""A sudo password that sudo cannot be given (a line break, a control character) ends
plan, apply and facts before any host is contacted, naming where it came from, never
what it is."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.exitcodes import ExitCode

ENV = "GPUNODE_TEST_BAD_SUDO_PW"


@pytest.mark.parametrize(
    ("command", "password", "why"),
    [
        ("apply", "first line\nsecret-tail", "a line break"),
        ("apply", "carriage\rreturn-tail", "a line break"),
        ("apply", "kill\x15line-tail", "a control character"),
        ("plan", "delete\x7fchar-tail", "a control character"),
        ("facts", "first line\nsecret-tail", "a line break"),
    ],
)
def test_a_password_sudo_cannot_read_is_refused_before_any_host(
    tmp_path: Path, command: str, password: str, why: str
) -> None:
    # the host's "sshd": a listening socket that records any connection made to it
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        f"defaults:\n  become_password_env: {ENV}\n  ssh:\n    port: {port}\n"
        "hosts:\n  h1:\n    address: 127.0.0.1\n"
    )
    args = {"apply": ["--yes", "--json"], "plan": [], "facts": []}[command]
    env = {**os.environ, ENV: password, "GPUNODE_STATE_DIR": str(tmp_path / "state")}
    try:
        res = subprocess.run(
            [sys.executable, "-m", "gpunode", command, str(inv), *args],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        with pytest.raises(TimeoutError):  # nothing ever connected
            server.accept()
    finally:
        server.close()
    assert res.returncode == ExitCode.BAD_INPUT == 4, res.stdout + res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        f"error: the sudo password in environment variable {ENV} contains {why}: sudo reads "
        "a password as one line of text; nothing was contacted"
    )
    assert "-tail" not in res.stdout + res.stderr
    assert res.stdout.strip() == ""
    state = tmp_path / "state"
    for path in state.rglob("*") if state.exists() else ():
        assert not path.is_file() or b"-tail" not in path.read_bytes(), path
