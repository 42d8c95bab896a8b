"""The confirmation binds: what `apply` shows at its `[y/N]` prompt is what it does. A host
that changed while the prompt waited, so that its plan now asks for more, is stopped
before any change, with "the plan changed since you confirmed it"; run on a terminal (a
pty), answered as an admin would, against a lab host whose file is removed meanwhile."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, on_host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
PROFILE = "/etc/profile.d/gpunode-cuda.sh"
STACK = {"driver": None, "cuda": None, "cudnn": None, "nccl": None, "cuda_env": True,
         "smoke": []}  # fmt: skip


class Terminal:
    """`gpunode apply` on a pseudo-terminal: its output read as it comes, keys typed."""

    def __init__(self, lab: Lab, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpunode", "apply", *args], env=lab.env,
            stdin=slave, stdout=slave, stderr=slave, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        self.text = ""

    def read_until(self, what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while what not in self.text:
            left = deadline - time.monotonic()
            assert left > 0, f"{what!r} not shown within {timeout:g}s: {self.text[-2000:]}"
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    self.text += os.read(self.master, 4096).decode(errors="replace")
                except OSError:  # the process ended and closed the terminal
                    assert what in self.text, self.text[-2000:]

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def finish(self, timeout: float = 300) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, self.text[-2000:]
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                try:
                    self.text += os.read(self.master, 4096).decode(errors="replace")
                except OSError:
                    break
        code = self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        os.close(self.master)
        return code


def test_a_host_that_changed_at_the_prompt_is_not_applied_silently(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **STACK)
    code, _ = apply(lab, inv, "--limit", HOST)  # converged: nothing to confirm but 0 changes
    assert code == 0
    term = Terminal(lab, str(inv), "--limit", HOST, "--no-tui")
    term.read_until("apply 0 change(s)? [y/N]")
    on_host(inv, HOST, f"sudo rm -f {PROFILE}")  # the host changes while the prompt waits
    term.type("y\n")
    code = term.finish()
    assert code == 4, term.text[-3000:]
    assert "the plan changed since you confirmed it" in term.text, term.text[-3000:]
    assert "not confirmed: cuda_env: CUDA_HOME" in term.text, term.text[-3000:]
    assert not on_host(inv, HOST, f"ls {PROFILE} 2>/dev/null || true").strip()  # not written

    # confirmed as it is, the same plan is applied
    term = Terminal(lab, str(inv), "--limit", HOST, "--no-tui")
    term.read_until("apply 1 change(s)? [y/N]")
    assert f"{HOST}: 1 change\n" in term.text.replace("\r\n", "\n"), term.text[-3000:]
    assert "1 host: 1 to change" in term.text, term.text[-3000:]  # the summary's total
    term.type("y\n")
    assert term.finish() == 0, term.text[-3000:]
    assert "CUDA_HOME" in on_host(inv, HOST, f"cat {PROFILE}")
