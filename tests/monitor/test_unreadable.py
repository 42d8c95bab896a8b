"""A host that answers but whose GPUs cannot be read, and a link cut under the process
reader: each shown as what it is, never as a thread's traceback."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from gpunode.monitor import Board, Sampler, SmiSource
from gpunode.transport.base import CommandResult
from gpunode.transport.local import LocalTransport
from tests.monitor.test_sampler import FAKE_DIR, wait_for

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


def test_gpus_unreadable_is_not_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'X'\n{NO_DRIVER}\nX\nexit 9\n")  # without a driver
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    runs: list[int] = []

    def source() -> SmiSource:
        runs.append(1)
        return SmiSource("gpu1", LocalTransport("gpu1"), interval=0.2, process_every=None)

    board = Board(["gpu1"])
    sampler = Sampler(board, {"gpu1": source}, backoff_first=0.1, backoff_cap=1.5)
    sampler.start()
    try:
        wait_for(lambda: board.view("gpu1").link == "unreadable")
        view = board.view("gpu1")
        assert view.detail == f"nvidia-smi: {NO_DRIVER}"  # whole, no "retry in"
        wait_for(lambda: len(runs) >= 2, timeout=15)  # looked at again, at the slowest pace
        assert board.view("gpu1").link == "unreadable"
    finally:
        sampler.stop(wait=5)


class CutTransport(LocalTransport):
    """A link that a reboot cut: the stream goes on, the process reader's channel raises
    paramiko's EOFError."""

    def run(self, argv: Any, **kw: Any) -> CommandResult:
        if "--query-compute-apps" in " ".join(argv):
            raise EOFError
        return super().run(argv, **kw)


def test_a_cut_link_never_prints_a_thread_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}")
    uncaught: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", uncaught.append)
    board = Board(["gpu1"])
    src = lambda: SmiSource("gpu1", CutTransport("gpu1"), interval=0.1, process_every=0.1)  # noqa: E731
    sampler = Sampler(board, {"gpu1": src})
    sampler.start()
    try:
        wait_for(lambda: board.view("gpu1").link == "live")
        wait_for(lambda: len(board.view("gpu1").history.get(0, [])) >= 5)  # procs read 3 times
    finally:
        sampler.stop(wait=5)
    assert uncaught == []
