"""The next run settles dead "running" records by their markers (records.running_dir),
not by reading every record kept: a controller with years of records starts as fast as a
new one, and no dead run's record stays "running"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode import records


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUNODE_STATE_DIR", str(tmp_path))
    return tmp_path


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def marks() -> list[str]:
    d = records.running_dir()
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def test_a_record_is_marked_while_it_runs_and_unmarked_when_it_ends(state: Path) -> None:
    rec = records.Record("apply", "inv.yaml", {})
    rec.save()
    assert marks() == [rec.id]
    rec.finish({}, 0, 1.0)
    assert marks() == []
    assert json.loads(rec.path.read_text())["status"] == "finished"
    assert oct(records.running_dir().stat().st_mode & 0o777) == "0o700"


def test_settling_reads_only_the_marked_records(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(30):
        done = records.Record("apply", "inv.yaml", {})
        done.finish({}, 0, 1.0)
    dead = records.Record("apply", "inv.yaml", {})
    dead.data["controller"]["pid"] = dead_pid()
    dead.save()
    alive = records.Record("apply", "inv.yaml", {})  # this process: still running
    alive.save()
    read: list[str] = []
    real = Path.read_text

    def spy(self: Path, *a: object, **k: object) -> str:
        if self.parent == records.runs_dir():
            read.append(self.name)
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", spy)
    settled = records.settle_abandoned()
    assert [d["id"] for d in settled] == [dead.id]
    assert sorted(read) == sorted([f"{dead.id}.json", f"{alive.id}.json"])
    assert json.loads(real(dead.path))["status"] == "abandoned"
    assert marks() == [alive.id]  # the live one stays marked, to be settled if it dies


def test_a_state_directory_from_before_the_markers_is_read_whole_once(state: Path) -> None:
    runs = state / "runs"
    runs.mkdir(mode=0o700)
    finished = {"id": "20260101T000000-aaaaaa", "status": "finished"}
    (runs / f"{finished['id']}.json").write_text(json.dumps(finished))
    old = records.Record("apply", "inv.yaml", {})
    old.data["controller"]["pid"] = dead_pid()
    (runs / f"{old.id}.json").write_text(json.dumps(old.data))  # as an older gpunode wrote it
    assert not records.running_dir().exists()
    assert [d["id"] for d in records.settle_abandoned()] == [old.id]
    assert json.loads((runs / f"{old.id}.json").read_text())["status"] == "abandoned"
    assert records.running_dir().is_dir() and marks() == []
    assert records.settle_abandoned() == []


def test_a_marker_left_by_a_crash_after_the_last_write_is_cleared(state: Path) -> None:
    rec = records.Record("apply", "inv.yaml", {})
    rec.save()
    rec.finish({}, 0, 1.0)
    (records.running_dir() / rec.id).touch()  # killed between the record and the unmark
    assert records.settle_abandoned() == []
    assert marks() == []
    assert json.loads(rec.path.read_text())["status"] == "finished"
