"""What a long-running `top` or `exporter` keeps stays bounded: an unfinished line of a
spewing host, the run records the exporter reads at every scrape, each GPU's history."""

from __future__ import annotations

import json
from pathlib import Path

from gpunode.monitor.board import HISTORY, Board
from gpunode.monitor.parse import LINE_MAX, LineSplitter
from gpunode.views.hoststate import RunRecords
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
