"""What a long-running `top` or `exporter` keeps stays bounded: an unfinished line of a
spewing host, the run records the exporter reads at every scrape, each GPU's history."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from gpunode.monitor.board import GPUS_MAX, HISTORY, Board
from gpunode.monitor.parse import LINE_MAX, LineSplitter
from gpunode.monitor.sources import STREAM_KEPT, EnergyMeter, SmiSource, StreamEnded
from gpunode.transport.base import CommandResult
from gpunode.transport.local import LocalTransport
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


class Recording(LocalTransport):
    """A real local shell; every command's result kept for the test to look at."""

    def __init__(self) -> None:
        super().__init__("gpu1")
        self.results: list[CommandResult] = []

    def run(self, command: Any, **kw: Any) -> CommandResult:
        res = super().run(command, **kw)
        self.results.append(res)
        return res


def test_a_stream_keeps_only_the_end_of_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A monitor's stream parses its rows as they come: what its command returns holds the
    last STREAM_KEPT bytes of each stream, not the transport's 4 MiB (an honest host's rows
    filled that for 40 minutes), while a one-off command keeps the default."""
    smi = tmp_path / "nvidia-smi"  # 1 MiB of rows on each stream, then a failure
    smi.write_text("#!/bin/sh\nyes '0, NVIDIA H200' | head -c 1048576\n"
                   "yes 'junk' | head -c 1048575 >&2\necho end >&2\nexit 9\n")  # fmt: skip
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    transport = Recording()
    src = SmiSource("gpu1", transport, interval=0.2, process_every=None)
    with pytest.raises(StreamEnded):
        src.stream(lambda _: None, lambda _: None, threading.Event())
    src._dmon(threading.Event(), threading.Event())  # the exporter's second stream
    assert len(transport.results) == 2
    for res in transport.results:
        assert len(res.stdout) == STREAM_KEPT and res.stdout_cut == (1 << 20) - STREAM_KEPT
        assert len(res.stderr) == STREAM_KEPT and res.stderr.endswith("junk\nend\n")
    assert len(transport.run("head -c 1048576 /dev/zero").stdout) == 1 << 20


def test_dmon_rows_of_invented_gpus_are_not_kept() -> None:
    src = SmiSource("gpu1", LocalTransport("gpu1"), dmon=True)
    rows = "\n".join(f"{i} 3" for i in range(GPUS_MAX * 4))

    class Dmon(LocalTransport):
        def run(self, command: Any, *, on_output: Any = None, **kw: Any) -> CommandResult:
            on_output("stdout", f"# gpu pci\n{rows}\n")
            return CommandResult("dmon", 0, "", "", 0.1)

    src.transport = Dmon("gpu1")
    src._dmon(threading.Event(), threading.Event())
    assert sorted(src._dmon_values) == list(range(GPUS_MAX))
