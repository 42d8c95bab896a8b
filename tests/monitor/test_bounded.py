"""What a long-running `top` or `exporter` keeps stays bounded: an unfinished line of a
spewing host, the run records the exporter reads at every scrape, each GPU's history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.monitor.board import GPUS_MAX, HISTORY, Board
from gpunode.monitor.parse import LINE_MAX, LineSplitter
from gpunode.monitor.sources import EnergyMeter
from gpunode.views.hoststate import RunRecords
from tests.conftest import until
from tests.tui import scenario as sc


def test_a_line_without_end_is_not_kept_whole() -> None:
    split = LineSplitter()
    for _ in range(64):
        assert list(split.feed("x" * (1 << 16))) == []  # 4 MiB, no newline
    assert len(split._rest) == LINE_MAX
    assert list(split.feed("\n0, 1\n")) == ["x" * LINE_MAX, "0, 1"]
    assert split._rest == ""


def test_the_exporter_keeps_records_without_their_steps_output(tmp_path: Path) -> None:
    big = "apt said " * 100_000  # 900 kB, as a failed step's output in a record
    record = {
        "id": "r1", "command": "apply", "status": "finished", "exit_code": 2, "pid": 0,
        "hosts": {"h1": {"status": "failed", "counts": {"failed": 1}, "changes": [
            {"status": "failed", "title": "t", "reason": "r", "seconds": 1.0, "diff": big,
             "output": {"command": "c", "exit_code": 1, "stdout": big, "stderr": big}},
        ]}},
    }  # fmt: skip
    (tmp_path / "r1.json").write_text(json.dumps(record))
    runs = RunRecords(tmp_path)
    runs.statuses()
    ((_, kept),) = runs._cache.values()
    assert kept is not None
    assert len(json.dumps(kept)) < 1000
    assert kept["hosts"]["h1"]["changes"][0]["status"] == "failed"  # what the metrics read
    assert "output" in json.loads((tmp_path / "r1.json").read_text())["hosts"]["h1"]["changes"][0]


def test_history_is_a_window() -> None:
    board = Board(["h1"], clock=sc.clock)
    for t in range(HISTORY * 3):
        board.add_samples("h1", sc.samples("h1", 2, t, sc.T0 + t))
    assert [len(h) for h in board.view("h1").history.values()] == [HISTORY, HISTORY]


def test_gpus_a_host_invents_are_not_kept() -> None:
    """A host printing rows with ever new indexes and UUIDs cannot grow the board or the
    energy meter past GPUS_MAX GPUs."""
    board = Board(["h1"], clock=sc.clock)
    meter = EnergyMeter(max_gap=5.0)
    base = sc.samples("h1", 1, 0, sc.T0)[0]
    for i in range(GPUS_MAX * 4):
        s = base.model_copy(update={"index": i, "uuid": f"GPU-made-up-{i}", "ts": sc.T0 + i})
        board.add_samples("h1", [meter.add(s)])
    view = board.view("h1")
    assert sorted(view.gpus) == list(range(GPUS_MAX)) and len(view.history) == GPUS_MAX
    assert len(meter._last) == GPUS_MAX


def test_the_heap_is_trimmed_while_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    """On glibc, keep_small fixes malloc's mmap threshold and trims until told to stop."""
    import threading

    from gpunode.monitor import heap

    calls: list[str] = []

    class Libc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append(f"mallopt {param} {value}")
            return 1

        def malloc_trim(self, pad: int) -> int:
            calls.append("trim")
            return 1

    monkeypatch.setattr(heap, "_glibc", Libc)
    monkeypatch.setattr(heap, "TRIM_EVERY", 0.01)
    stop = threading.Event()
    heap.keep_small(stop)
    until(lambda: calls.count("trim") >= 3, 5, "three trims")
    stop.set()
    until(lambda: not [t for t in threading.enumerate() if t.name == "heap-trim"], 5, "its end")
    assert calls[:2] == [f"mallopt -3 {128 << 10}", "mallopt -8 2"]
    assert heap._glibc() is not None  # this machine's libc has both calls
