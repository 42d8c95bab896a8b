"""Stopping a run, without hosts: a record whose process died reads "abandoned" (report,
the exporter's records, the next run, which finds it by its running marker), a record
directory that cannot be written ends a run with a warning, the stop starts no more hosts,
and the apply TUI's quit (`q`, Ctrl-Q) asks with a dialog that says what quitting does.
The lab tests (tests/apply/test_interrupt_lab.py) stop real runs through the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from gpunode import records
from gpunode.events import Bus, Event, HostConnecting
from gpunode.hostpool import Stop, run_hosts
from gpunode.tui.app import GpunodeApp
from gpunode.tui.run_screen import RunScreen
from gpunode.tui.screens import ConfirmQuit
from gpunode.views.hoststate import RunRecords
from tests.tui import scenario as sc


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUNODE_STATE_DIR", str(tmp_path))
    return tmp_path


def dead_pid() -> int:
    """A pid no process has now: a child that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def running_record(**controller: Any) -> Path:
    rec = records.Record("apply", "inv.yaml", {})
    rec.data["controller"].update(controller)
    return rec.save()


def test_a_running_record_whose_process_is_gone_reads_abandoned(state: Path) -> None:
    path = running_record(pid=dead_pid())
    assert json.loads(path.read_text())["status"] == "running"
    data = records.load_run(path)
    assert data["status"] == "abandoned" and "is gone" in data["abandoned"]
    shown = subprocess.run([sys.executable, "-m", "gpunode", "report", "--json", path.stem],
                           capture_output=True, text=True, env=os.environ)  # fmt: skip
    assert json.loads(shown.stdout)["status"] == "abandoned", shown.stderr
    # the next run writes it so: no record stays "running"
    settled = records.settle_abandoned()
    assert [d["id"] for d in settled] == [path.stem]
    assert json.loads(path.read_text())["status"] == "abandoned"
    assert records.settle_abandoned() == []  # once


def test_a_record_of_a_controller_that_rebooted_is_abandoned_a_live_one_is_not(
    state: Path,
) -> None:
    live = running_record()  # this process: alive, same boot
    assert records.load_run(live)["status"] == "running"
    rebooted = running_record(boot_id="00000000-0000-0000-0000-000000000000")
    assert "rebooted" in records.load_run(rebooted)["abandoned"]
    reused = running_record(pid_start="1")  # our pid, but another process's start
    assert records.load_run(reused)["status"] == "abandoned"
    elsewhere = running_record(pid=dead_pid(), host="another-controller")
    assert records.load_run(elsewhere)["status"] == "running"  # cannot tell from here


def test_the_exporter_counts_runs_by_status(state: Path) -> None:
    running_record(pid=dead_pid())
    done = records.Record("apply", "inv.yaml", {})
    done.finish({}, 130, 1.0, status="interrupted")
    assert RunRecords(state / "runs").statuses() == {"abandoned": 1, "interrupted": 1}


# The next run settles dead records by their markers (records.running_dir), not by reading
# every record kept: a controller with years of records starts as fast as a new one.


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


def test_a_record_directory_gone_at_the_end_is_a_warning(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = records.Record("apply", "inv.yaml", {})
    path = rec.save()
    shutil.rmtree(path.parent)  # the record and its running marker
    path.parent.write_text("")  # not a directory now: root could write any mode
    assert rec.finish({}, 0, 1.0) == path
    assert "could not be written" in capsys.readouterr().err


def test_a_stop_starts_no_more_hosts_and_cut_closes_the_open_ones() -> None:
    class Fake:
        closed = 0

        def connect(self) -> None:
            pass

        def close(self) -> None:
            self.closed += 1

    stop, bus, started = Stop(), Bus(), threading.Event()
    release = threading.Event()
    transports: list[Fake] = []

    def opener(host: Any, password: Any) -> Any:
        transports.append(Fake())
        return transports[-1]

    def work(t: Any, host: Any) -> str:
        started.set()
        release.wait(10)
        return str(host.name)

    class H:
        def __init__(self, name: str) -> None:
            self.name, self.target, self.become_password_env = name, name, None

    hosts: list[Any] = [H("a"), H("b")]
    out: dict[str, Any] = {}
    password: Any = "x"  # none asked for: the fake opener takes none
    runner = threading.Thread(target=lambda: out.update(
        run_hosts(hosts, work, bus=bus, forks=1, opener=opener, stop=stop,
                  become_password=password)))  # fmt: skip
    runner.start()
    assert started.wait(10)
    assert stop.request("interrupted (Ctrl-C)", 130)
    assert not stop.request("terminated (SIGTERM)", 143)  # the first one stays
    stop.cut()
    assert transports[0].closed >= 1  # closed under the running work
    release.set()
    runner.join(10)
    assert out["a"].status == "ok" and out["b"].status == "skipped", out
    assert "interrupted (Ctrl-C)" in out["b"].error
    assert len(transports) == 1  # b never connected


def test_a_view_whose_output_closed_is_dropped_and_said() -> None:
    bus, said, seen = Bus(), [], list[Event]()

    def closed(e: Event) -> None:
        raise BrokenPipeError

    bus.subscribe(closed)
    bus.subscribe(seen.append)
    bus.on_closed = lambda: said.append(True)
    bus.emit(HostConnecting("a", target="a"))
    bus.emit(HostConnecting("b", target="b"))
    assert said == [True] and len(seen) == 2


def make_app() -> GpunodeApp:
    return GpunodeApp(hosts=sc.HOSTS, clock=sc.clock)


async def feed(app: GpunodeApp, pilot: Any) -> None:
    for e in sc.run_events():
        app.post_event(e)
    screen = app.screen
    assert isinstance(screen, RunScreen)
    screen.apply_events()
    await pilot.pause()


@pytest.mark.parametrize("key", ["q", "ctrl+q"])
def test_quitting_mid_run_asks_and_says_the_run_stops_as_on_ctrl_c(key: str) -> None:
    app = make_app()
    asyncio.run(quit_mid_run(app, key))
    assert app.return_value == 130


async def quit_mid_run(app: GpunodeApp, key: str) -> None:
    async with app.run_test(size=(150, 45)) as pilot:
        await feed(app, pilot)
        await pilot.press(key)
        assert isinstance(app.screen, ConfirmQuit)
        text = str(app.screen.query_one("#quit-text", Static).render())
        assert "no new change or host starts" in text and "recorded as interrupted" in text
        await pilot.press("ctrl+q")  # asked already: not a second dialog, not a quit
        assert isinstance(app.screen, ConfirmQuit) and app.is_running
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmQuit) and app.is_running
        await pilot.press(key, "y")
