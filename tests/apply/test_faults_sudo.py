"""sudo with a password through `gpunode apply` on lab hosts: a password full of shell
characters works and is never written down or shown, a wrong one fails in seconds, and
`Defaults requiretty` fails with sudo's own reason.

The lab is started with `--sudo-password-env`: its hosts' sudo asks for the password."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# by package, not `from conftest import`: another folder's conftest may hold that name
from tests.apply.conftest import Lab, events, of, start_lab, wait_for_ssh
from tests.conftest import SLOT, slot_net

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NO_STACK: dict[str, Any] = {
    "driver": None,
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}
ENV = "GPUNODE_TEST_SUDO_PW"
PASSWORD = "p' \"q$HOME;r\\s t"  # ' " $ ; \ and a space
HOST = "lab-01"
STACK: dict[str, Any] = {**NO_STACK, "cuda_env": True}  # root-owned files: sudo, no apt


@pytest.fixture(scope="module")
def pwlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    old = os.environ.get(ENV)
    os.environ[ENV] = PASSWORD
    try:
        args = ("--hosts", "1", "--ubuntu", "22.04", "--net", str(slot_net(235)),
                "--port", str(2235 + 1000 * SLOT), "--sudo-password-env", ENV)  # fmt: skip
        yield from start_lab(tmp_path_factory, *args)
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


def as_root(inv: Path, command: str) -> str:
    from gpunode.inventory import load
    from gpunode.transport.connect import open_transport
    from gpunode.transport.secret import Secret

    t = open_transport(load(inv).hosts[HOST], become_password=Secret(PASSWORD))
    t.connect()
    try:
        res = t.run(command, sudo=True)
    finally:
        t.close()
    assert res.ok, res.stderr
    return res.stdout


def reset(lab: Lab) -> None:
    assert lab.gpunode("lab", "reset", HOST).returncode == 0
    wait_for_ssh(lab, HOST)


def cmdlines() -> Iterator[bytes]:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    yield fh.read()
            except OSError:
                continue


def test_a_password_with_shell_characters_works_and_is_never_written_or_shown(
    pwlab: Lab, tmp_path: Path
) -> None:
    reset(pwlab)
    inv = pwlab.inventory(tmp_path, **STACK)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "--no-smoke"],
        env=pwlab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    secret = PASSWORD.encode()
    seen = 0
    deadline = time.monotonic() + 60
    while proc.poll() is None:  # the process list, for as long as apply runs
        assert time.monotonic() < deadline, "apply did not finish in 60 s"
        for cmd in cmdlines():
            assert secret not in cmd and secret not in cmd.replace(b"\0", b" ")
            seen += 1
    out, err = proc.communicate(timeout=30)
    assert seen, "the process list was never read while apply ran"
    assert proc.returncode == 0, out.decode()[-2000:] + err.decode()[-2000:]
    evs = events(out.decode())
    assert [e["status"] for e in of(evs, "change-finished", HOST)] and all(
        e["status"] == "changed" for e in of(evs, "change-finished", HOST)
    )
    assert "export CUDA_HOME=/usr/local/cuda" in as_root(inv, "cat /etc/profile.d/gpunode-cuda.sh")
    assert secret not in out and secret not in err
    state = Path(pwlab.env["GPUNODE_STATE_DIR"])
    records = [p for p in state.rglob("*") if p.is_file()]
    assert records, "apply wrote no run record"
    for path in records:
        assert secret not in path.read_bytes(), f"the password is in {path}"


def test_a_wrong_password_fails_within_seconds(pwlab: Lab, tmp_path: Path) -> None:
    inv = pwlab.inventory(tmp_path, **STACK)
    as_root(inv, "rm -f /etc/profile.d/gpunode-cuda.sh")  # something to change
    env = {**pwlab.env, ENV: "not the password"}
    start = time.monotonic()
    res = pwlab.gpunode("apply", str(inv), "--yes", "--json", "--no-smoke", env=env, timeout=60)
    took = time.monotonic() - start
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    (done,) = of(events(res.stdout), "host-finished", HOST)
    assert done["message"] == f"sudo: incorrect password for ubuntu@{HOST}", done
    assert took < 15, f"a wrong password took {took:.1f} s"
    assert of(events(res.stdout), "change-finished", HOST) == [] or all(
        e["status"] != "changed" for e in of(events(res.stdout), "change-finished", HOST)
    )
    assert b"not the password" not in res.stdout.encode() + res.stderr.encode()


def test_requiretty_fails_with_sudos_reason(pwlab: Lab, tmp_path: Path) -> None:
    inv = pwlab.inventory(tmp_path, **STACK)
    as_root(inv, "rm -f /etc/profile.d/gpunode-cuda.sh")  # something to change
    as_root(inv, "printf 'Defaults requiretty\\n' > /etc/sudoers.d/zz-requiretty")
    try:
        start = time.monotonic()
        res = pwlab.gpunode("apply", str(inv), "--yes", "--json", "--no-smoke", timeout=60)
        took = time.monotonic() - start
        # gpunode asks for no pty (sudo reads the password from stdin): sudo's own reason
        assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
        evs = events(res.stdout)
        (done,) = of(evs, "host-finished", HOST)
        assert done["message"] == (
            f"sudo failed for ubuntu@{HOST}: sudo: sorry, you must have a tty to run sudo"
        )
        assert done["changed"] == 0 and took < 15
        assert all(e["status"] != "changed" for e in of(evs, "change-finished", HOST))
        assert PASSWORD not in res.stdout + res.stderr
    finally:
        reset(pwlab)
