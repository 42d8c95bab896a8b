"""become_password_env: read once, then gone from the environment every child inherits."""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

import pytest

from gpunode.events import Bus
from gpunode.hostpool import run_hosts
from gpunode.inventory import loads
from gpunode.inventory.model import Host
from gpunode.transport.base import Transport
from gpunode.transport.local import LocalTransport
from gpunode.transport.secret import Secret, child_env

from .sshd import PASS_USER, SshServer


def _wait_for(path: Path, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)
    return path.read_text().strip()


def test_password_is_not_inherited_and_still_works_for_sudo(
    ssh_server: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    var = f"GPUNODE_TEST_SUDO_PW_{secrets.token_hex(4).upper()}"
    password = ssh_server.sudo_password
    monkeypatch.setenv(var, password)
    inv = loads(
        f"defaults: {{become_password_env: {var}}}\n"
        "hosts:\n"
        "  me: {connection: local}\n"
        "  remote:\n"
        "    address: 127.0.0.1\n"
        f"    ssh: {{user: {PASS_USER}, port: {ssh_server.port}, "
        f"identity_file: '{ssh_server.client_key}', "
        f"known_hosts_file: '{ssh_server.known_hosts}', config_file: null}}\n"
    )
    pidfile = tmp_path / "child.pid"

    def work(t: Transport, host: Host) -> tuple[str, str]:
        if isinstance(t, LocalTransport):
            # a child that lives on: its /proc/<pid>/environ is read from outside below
            t.run(f"sh -c 'echo $$ > {pidfile}; exec sleep 30' >/dev/null 2>&1 &")
            seen = t.run("tr '\\0' '\\n' < /proc/self/environ; echo ---; env")
            return seen.stdout, ""
        res = t.run("id -u", sudo=True)
        return res.stdout, res.stderr

    out = run_hosts(list(inv.hosts.values()), work, bus=Bus())
    assert out["me"].status == "ok", out["me"].error
    assert out["remote"].status == "ok", out["remote"].error
    local_env, _ = out["me"].value or ("", "")
    assert "PATH=" in local_env  # the child saw an environment, just not the password
    assert var not in local_env and password not in local_env
    pid = int(_wait_for(pidfile))
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    finally:
        os.kill(pid, signal.SIGKILL)
    assert b"PATH=" in environ
    assert var.encode() not in environ and password.encode() not in environ
    assert var not in os.environ and var not in child_env()
    # ... and the password still reached sudo over SSH, which accepted it
    assert out["remote"].value == ("0\n", "")
    assert Secret.from_env(var) == Secret(password)  # kept in memory, not in the environment


def test_local_transport_children_never_get_a_taken_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    var = f"GPUNODE_TEST_SUDO_PW_{secrets.token_hex(4).upper()}"
    monkeypatch.setenv(var, "first-secret")
    assert Secret.from_env(var) == Secret("first-secret")
    assert var not in os.environ
    # something sets it again later (a library, a test): children still do not see it
    os.environ[var] = "second-secret"
    res = LocalTransport().run("env")
    assert "second-secret" not in res.stdout and var not in res.stdout
    assert Secret.from_env(var) == Secret("second-secret")  # the newer value wins
    assert var not in os.environ


def test_the_password_leaves_the_processs_own_proc_environ() -> None:
    """/proc/<pid>/environ shows the block a process started with, which unsetenv leaves:
    once read, the password is gone from gpunode's own, read from outside and inside."""
    import subprocess
    import sys

    password = f"pw-{secrets.token_hex(8)}"
    code = (
        "import sys\n"
        "from gpunode.transport.secret import Secret\n"
        "s = Secret.from_env('GPUNODE_TEST_PW')\n"
        "own = open('/proc/self/environ', 'rb').read()\n"
        "print(s.reveal() if s else None, own.count(sys.argv[1].encode()), flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, password], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "GPUNODE_TEST_PW": password})  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline().split() == [password, "0"]  # still usable, gone inside
        outside = Path(f"/proc/{child.pid}/environ").read_bytes()
        assert password.encode() not in outside
        assert b"PATH=" in outside  # the rest of the block is as it was
    finally:
        child.communicate("", timeout=10)
