"""The real `gpunode smoke` in a real terminal (tmux): each host's tests as they finish, a
host it cannot reach, the GPUs tab, and the report once the screen is quit.

Two `connection: local` hosts with an nvidia-smi stand-in first on PATH that prints lines
shaped like the H200 captures, and one SSH host on a port nothing listens on; the suite,
the transports, the sampler and the app are all real.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tui.tmux import Tmux, start_gpunode

FAKE_DIR = Path(__file__).parent.parent / "fixtures" / "monitor"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rows(screen: str, host: str) -> list[str]:
    """The smoke table's rows of `host`: a mark, the host, then the test."""
    return [ln for ln in screen.splitlines() if len(p := ln.split()) > 2 and p[1] == host]


@pytest.fixture
def smoke(tmp_path: Path) -> Iterator[tuple[Tmux, Path]]:
    port = closed_port()
    inv = tmp_path / "lab.yaml"
    inv.write_text(
        "defaults: {connection: local, become: none, gpus: {count: 4}}\n"
        "hosts:\n  local-a: {}\n  local-b: {}\n"
        f"  gone: {{connection: ssh, address: 127.0.0.1, ssh: {{port: {port}, user: nobody}}}}\n"
    )
    state = tmp_path / "state"
    env = {
        "PATH": f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SMI_GPUS": "4",
        "GPUNODE_STATE_DIR": str(state),
    }
    t = start_gpunode(["smoke", str(inv), "--only", "nvidia-smi"], env, size=(170, 40))
    try:
        yield t, state
    finally:
        t.kill()


def test_smoke_shows_each_hosts_tests_and_the_lost_host_then_reports(
    smoke: tuple[Tmux, Path],
) -> None:
    t, state = smoke

    def done(s: str) -> bool:
        # finished, and laid out: a run that ends before the app's first layout (a loaded
        # machine) is painted once with the columns fitted at mount (no measured values)
        gpus = [ln for h in ("local-a", "local-b") for ln in rows(s, h) if "nvidia-smi/gpus" in ln]
        return "finished, exit" in s and len(gpus) == 2 and all("4 GPUs" in ln for ln in gpus)

    s = t.wait(done, timeout=60)
    assert "gpunode smoke · lab" in s
    module_loaded = Path("/sys/module/nvidia/version").exists()
    for host in ("local-a", "local-b"):
        mine = rows(s, host)
        gpus = next(ln for ln in mine if "nvidia-smi/gpus" in ln)
        assert " pass " in gpus and "4 GPUs" in gpus, gpus  # the stand-in's four H200s
        driver = next(ln for ln in mine if "nvidia-smi/driver" in ln)
        if not module_loaded:  # this machine has no nvidia module: the suite says so
            assert " fail " in driver and "kernel module is not loaded" in driver, driver
    (gone,) = rows(s, "gone")
    assert "unreachable" in gone and "Connection refused" in gone, gone
    assert "finished, exit 2" in s  # a failed test (2) outranks an unreachable host (3)

    t.keys("2")  # the GPUs tab: the stand-in's GPUs, read while the suite ran
    s = t.wait(lambda s: "4x H200" in s and "580.159.04" in s, timeout=30)
    t.keys("1")
    t.wait(lambda s: "nvidia-smi/gpus" in s)

    t.keys("q")  # the run is over: no question, the report follows the screen
    assert t.exit_code() == 2
    s = t.screen()
    assert "local-a: failed" in s or "local-a: ok" in s
    assert "gone: unreachable: cannot connect to 127.0.0.1:" in s
    (record,) = (state / "runs").glob("*.json")
    data = json.loads(record.read_text())
    assert data["hosts"]["gone"]["status"] == "unreachable"
    assert data["exit_code"] == 2
