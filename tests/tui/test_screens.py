"""Each mode of the app starts on its own screen, with that screen's keys and views only."""

from __future__ import annotations

from textual.pilot import Pilot

from gpunode.tui.app import GpunodeApp
from gpunode.tui.gpu_view import GpuView
from gpunode.tui.run_screen import RunScreen
from gpunode.tui.run_view import RunView
from gpunode.tui.screens import ConfirmQuit
from gpunode.tui.smoke_screen import SmokeScreen
from gpunode.tui.smoke_view import SmokeView
from gpunode.tui.top_screen import TopScreen
from tests.tui import scenario as sc


def shown_keys(pilot: Pilot[int]) -> list[str]:
    """The keys the footer offers, in its order."""
    return [b.binding.key for b in pilot.app.screen.active_bindings.values() if b.binding.show]


async def test_run_mode_starts_on_the_run_screen_with_its_tabs_and_keys() -> None:
    app = GpunodeApp(hosts=sc.HOSTS, board=sc.board(), clock=sc.clock)
    async with app.run_test(size=(150, 40)) as pilot:
        assert type(app.screen) is RunScreen
        assert app.screen.query(RunView) and app.screen.query(SmokeView)
        assert app.screen.query(GpuView)
        assert shown_keys(pilot)[:4] == ["q", "question_mark", "slash", "r"]
        assert app.focused is not None and app.focused.id == "run-table"


async def test_top_mode_starts_on_the_top_screen_without_the_runs_keys() -> None:
    app = GpunodeApp(mode="top", board=sc.board(), clock=sc.clock)
    async with app.run_test(size=(150, 40)) as pilot:
        assert type(app.screen) is TopScreen
        assert app.screen.query(GpuView)
        assert not app.screen.query(RunView) and not app.screen.query(SmokeView)
        bound = set(app.screen.active_bindings)
        assert {"q", "question_mark", "slash", "o", "s"} <= bound
        assert not bound & {"r", "1", "2", "3"}
        assert app.focused is not None and app.focused.id == "gpu-table"
        await pilot.press("r", "3")  # no run to retry, no tabs: nothing happens
        assert type(app.screen) is TopScreen and app.is_running
        await pilot.press("q")
    assert app.return_value == 0


async def settle(pilot: Pilot[int]) -> None:
    while pilot.app._inbox:  # type: ignore[attr-defined]
        await pilot.pause(0.05)
    await pilot.pause(0.3)


async def test_smoke_mode_starts_on_the_smoke_screen_and_asks_before_quitting_a_run() -> None:
    app = GpunodeApp(mode="smoke", hosts=sc.HOSTS, board=sc.board(), clock=sc.clock)
    async with app.run_test(size=(150, 40)) as pilot:
        assert type(app.screen) is SmokeScreen
        assert app.screen.query(SmokeView) and app.screen.query(GpuView)
        assert not app.screen.query(RunView)
        bound = set(app.screen.active_bindings)
        assert {"q", "question_mark", "slash", "1", "2"} <= bound and "r" not in bound
        assert app.focused is not None and app.focused.id == "smoke-table"
        for e in sc.smoke_run_events(finished=False):
            app.post_event(e)
        await settle(pilot)
        view = app.screen.query_one(SmokeView)
        assert "gpu-c/unreachable" in view.rows()  # the host no test reached, with why
        assert view.cell_text("gpu-c/unreachable", 7).endswith("Connection refused")
        assert "gpu-a/nccl-allreduce" in view.rows()
        assert app.screen.sub_title == "smoke: 3 of 4 hosts done, 2 failed or unreachable"
        await pilot.press("2")
        assert app.focused is not None and app.focused.id == "gpu-table"
        await pilot.press("1")
        await pilot.press("q")  # gpu-b is still running: asked first
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("escape")
        assert type(app.screen) is SmokeScreen
        for e in sc.smoke_run_events()[len(sc.smoke_run_events(finished=False)) :]:
            app.post_event(e)
        await settle(pilot)
        assert app.screen.sub_title == "finished, exit 2"
        await pilot.press("q")  # over: no question, the run's exit status
    assert app.return_value == 2
