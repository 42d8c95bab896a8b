"""A real terminal for the TUI tests: a detached tmux server of our own, read with capture-pane."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

EXIT_MARK = "EXITED="


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

    def wait(self, cond: Callable[[str], bool], timeout: float = 20.0, every: float = 0.2) -> str:
        end = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < end:
            screen = self.screen()
            if cond(screen):
                return screen
            time.sleep(every)
        raise AssertionError(f"screen never matched in {timeout:g}s; last screen:\n{screen}")

    def exit_code(self, timeout: float = 20.0) -> int:
        """The command's exit status, which the pane prints after it ends."""
        s = self.wait(lambda s: EXIT_MARK in s, timeout)
        tail = s[s.rindex(EXIT_MARK) + len(EXIT_MARK) :]
        return int(tail.split()[0])

    def kill(self) -> None:
        self.cmd("kill-server")


def start_gpunode(
    args: Sequence[str], env: Mapping[str, str], size: tuple[int, int] = (160, 40)
) -> Tmux:
    """`python -m gpunode ARGS` full-screen in a fresh tmux server of `size` columns x rows.

    The pane stays open after the command ends, showing EXITED=<status>.
    """
    full_env = {"TERM": "xterm-256color", **env}
    cmd = " ".join(
        [
            "env", "-u", "COLUMNS", "-u", "LINES",  # set by pytest; Textual would obey them
            *(shlex.quote(f"{k}={v}") for k, v in full_env.items()),
            shlex.quote(sys.executable), "-m", "gpunode", *map(shlex.quote, args),
            ";", "echo", f"{EXIT_MARK}$?", ";", "sleep", "120",
        ]
    )  # fmt: skip
    name = args[0] if args else "gpunode"
    t = Tmux(f"gpunode-test-{os.getpid()}-{name}", name)
    cols, rows = size
    # Fix the size before the app starts: a detached session may otherwise shrink to 80x24.
    t.cmd("-f", "/dev/null", "new-session", "-d", "-s", name, "-x", str(cols), "-y", str(rows),
          "sleep 900")  # fmt: skip
    t.cmd("set-option", "-g", "window-size", "manual")
    t.cmd("resize-window", "-t", name, "-x", str(cols), "-y", str(rows))
    t.cmd("respawn-pane", "-k", "-t", name, cmd)
    return t


def host_line(screen: str, host: str) -> str:
    """The first table row of `host`: a status mark, then the name."""
    for ln in screen.splitlines():
        parts = ln.split()
        if len(parts) >= 2 and parts[1] == host and len(parts[0]) == 1:
            return ln
    return ""
