"""The real `gpunode top` in a real terminal (tmux), read back with capture-pane.

The hosts are `connection: local` with an nvidia-smi stand-in first on PATH that prints
lines shaped like the H200 captures; the transport, sampler and app are all real.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

FAKE_DIR = Path(__file__).parent.parent / "fixtures" / "monitor"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


class Tmux:
    def __init__(self, socket: str, session: str) -> None:
        self.socket, self.session = socket, session

    def cmd(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False
        )
        return out.stdout

    def screen(self) -> str:
        return self.cmd("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        self.cmd("send-keys", "-t", self.session, *keys)

    def alive(self) -> bool:
        return self.session in self.cmd("list-sessions", "-F", "#{session_name}")

    def wait(self, cond: Callable[[str], bool], timeout: float = 20.0) -> str:
        end = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < end:
            screen = self.screen()
            if cond(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"screen never matched; last screen:\n{screen}")


def host_line(screen: str, host: str) -> str:
    return next((ln for ln in screen.splitlines() if f" {host} " in ln), "")


@pytest.fixture
def top(tmp_path: Path) -> Iterator[tuple[Tmux, Path]]:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "defaults: {connection: local, become: none}\nhosts:\n  local-a: {}\n  local-b: {}\n"
    )
    down = tmp_path / "down"
    env = {
        "PATH": f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SMI_DOWN": str(down),
        "FAKE_SMI_GPUS": "4",
        "TERM": "xterm-256color",
    }
    cmd = " ".join(
        [
            "env", "-u", "COLUMNS", "-u", "LINES",  # set by pytest; Textual would obey them
            *(shlex.quote(f"{k}={v}") for k, v in env.items()),
            shlex.quote(sys.executable), "-m", "gpunode", "top", shlex.quote(str(inv)),
            "--interval", "0.5",
            ";", "echo", "EXITED=$?", ";", "sleep", "30",
        ]
    )  # fmt: skip
    t = Tmux(f"gpunode-test-{os.getpid()}", "top")
    # Fix the size before the app starts: a detached session may otherwise shrink to 80x24.
    t.cmd("-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "160", "-y", "40", "sleep 600")
    t.cmd("set-option", "-g", "window-size", "manual")
    t.cmd("resize-window", "-t", "top", "-x", "160", "-y", "40")
    t.cmd("respawn-pane", "-k", "-t", "top", cmd)
    try:
        yield t, down
    finally:
        t.cmd("kill-server")


def test_top_shows_live_gpus_survives_a_drop_and_quits(top: tuple[Tmux, Path]) -> None:
    t, down = top
    s = t.wait(lambda s: "live" in host_line(s, "local-a") and "live" in host_line(s, "local-b"))
    assert "Lab overview" in s and "2 hosts (2 live), 8 GPUs" in s
    line = host_line(s, "local-a")
    assert "/561.6" in line  # 4 x 143771 MiB, in GiB
    first = line
    # The stand-in's utilisation moves every tick: the view must move too.
    t.wait(lambda s: host_line(s, "local-a") != first and "live" in host_line(s, "local-a"))

    down.touch()  # every nvidia-smi now fails like a lost GPU
    s = t.wait(lambda s: "stale" in host_line(s, "local-a"), timeout=30)
    assert "/561.6" in host_line(s, "local-a")  # last values kept, marked stale
    down.unlink()
    t.wait(lambda s: "live" in host_line(s, "local-a"), timeout=40)

    t.keys("o")  # one host's GPUs
    s = t.wait(lambda s: "SM MHz" in s and "H200" in s)
    assert sum(1 for ln in s.splitlines() if " H200 " in ln) == 4
    t.keys("q")
    s = t.wait(lambda s: "EXITED=" in s)
    assert "EXITED=0" in s
