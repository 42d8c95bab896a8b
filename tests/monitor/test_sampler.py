"""The sampler against a real local shell running an nvidia-smi stand-in that can drop."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpunode.monitor import Board, Sampler, SmiSource, backoff_delays
from gpunode.transport.local import LocalTransport

FAKE_DIR = Path(__file__).parent.parent / "fixtures" / "monitor"


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("PATH", f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}")
    down = tmp_path / "down"
    monkeypatch.setenv("FAKE_SMI_DOWN", str(down))
    yield down


def test_backoff_doubles_up_to_the_cap() -> None:
    assert backoff_delays(1, 30) == [1, 2, 4, 8, 16, 30]
    assert backoff_delays(0.5, 0.5) == [0.5]


def test_host_drops_keeps_last_values_and_comes_back(fake_smi: Path) -> None:
    board = Board(["gpu1"], stale_after=2.0)
    src = lambda: SmiSource("gpu1", LocalTransport("gpu1"), interval=0.2, process_every=0.3)  # noqa: E731
    sampler = Sampler(board, {"gpu1": src}, backoff_first=0.2, backoff_cap=0.4)
    sampler.start()
    try:
        wait_for(lambda: board.view("gpu1").link == "live" and len(board.view("gpu1").gpus) == 2)
        v = board.view("gpu1")
        assert v.source == "nvidia-smi"
        assert v.gpus[0].name == "NVIDIA H200" and v.gpus[1].memory_total_mib == 143771
        wait_for(lambda: len(board.view("gpu1").history[0]) >= 3)
        wait_for(lambda: [p.user for p in board.view("gpu1").processes] == ["root"])
        assert board.view("gpu1").processes[0].command == "python3 train.py"

        fake_smi.touch()  # the GPU is lost: nvidia-smi exits
        wait_for(lambda: board.view("gpu1").link == "stale")
        stale = board.view("gpu1")
        assert len(stale.gpus) == 2  # last values kept
        assert "retry in" in stale.detail
        last_ts = stale.last_ts
        assert last_ts is not None
        time.sleep(1.0)  # several failed reconnects while it stays down
        assert board.view("gpu1").last_ts == last_ts

        fake_smi.unlink()
        wait_for(lambda: board.view("gpu1").link == "live")
        wait_for(lambda: (board.view("gpu1").last_ts or 0) > last_ts)
    finally:
        sampler.stop(wait=5)
    assert sampler.stopped


def test_quiet_host_turns_stale_by_time() -> None:
    now = [100.0]
    board = Board(["a"], stale_after=3.0, clock=lambda: now[0])
    from gpunode.monitor import GpuSample

    board.add_samples("a", [GpuSample(host="a", index=0, name="H200", uuid="u", ts=100.0)])
    assert board.links() == {"a": "live"} and board.view("a").link == "live"
    now[0] = 104.0
    assert board.links() == {"a": "stale"} and board.view("a").link == "stale"
    assert board.drain() == {"a"} and board.drain() == set()


def test_unreachable_from_the_start_is_down_not_stale() -> None:
    board = Board(["a"])
    board.set_status("a", "stale", "connection refused")
    assert board.view("a").link == "down"
