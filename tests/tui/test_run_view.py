"""The run view, driven only by events, under Textual's Pilot."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from textual.pilot import Pilot
from textual.widgets import Log

from gpunode import events as ev
from gpunode.tui.app import GpunodeApp
from gpunode.tui.run_screen import RunScreen
from gpunode.tui.run_view import RunView
from tests.tui import scenario as sc

STATUS, STEP, PROGRESS, OK, CHG, FAIL, TIME = 2, 3, 4, 5, 6, 7, 8


async def feed(app: GpunodeApp, pilot: Pilot[int], events: Iterable[ev.Event]) -> None:
    for e in events:
        app.post_event(e)
    while app._inbox:
        await pilot.pause(0.05)
    await pilot.pause()


def make_app(**kw: object) -> GpunodeApp:
    return GpunodeApp(hosts=sc.HOSTS, clock=sc.clock, **kw)  # type: ignore[arg-type]


async def test_rows_follow_events() -> None:
    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        view = app.query_one(RunView)
        assert view.rows() == list(sc.HOSTS)
        assert all(view.cell_text(h, STATUS) == "waiting" for h in sc.HOSTS)
        await feed(app, pilot, sc.run_events())
        status = {h: view.cell_text(h, STATUS) for h in sc.HOSTS}
        assert status == {
            "gpu-a": "changed",
            "gpu-b": "applying",
            "gpu-c": "unreachable",
            "gpu-d": "rebooting",
        }
        assert view.cell_text("gpu-b", STEP) == "[2/4] driver: nvidia-open-580 580.159.04"
        assert view.cell_text("gpu-b", PROGRESS).endswith(" 1/4")
        assert view.cell_text("gpu-a", CHG) == "2" and view.cell_text("gpu-a", TIME) == "0:45"
        assert view.cell_text("gpu-c", STEP).startswith("connection refused")
        assert view.cell_text("gpu-d", STEP) == "reboot: load nvidia 580.159.04"
        assert app.query_one("#run-recap").display is False

        await feed(app, pilot, sc.finish_events())
        assert view.cell_text("gpu-b", STATUS) == "failed"
        assert view.cell_text("gpu-b", FAIL) == "1"
        assert view.cell_text("gpu-d", STATUS) == "changed"
        recap = app.query_one("#run-recap")
        assert recap.display is True
        text = str(recap.render())
        assert "exit 2" in text and "gpu-b" in text and "failed=1" in text


async def test_plan_text_with_brackets_and_equals_is_shown_as_is() -> None:
    """Real plans carry commands like `env DEBIAN_FRONTEND=... ['x']`: shown, never parsed."""
    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await feed(app, pilot, sc.run_events())
        await pilot.press("down")  # gpu-b's plan holds the keyring change
        plan = str(app.query_one("#run-plan").render())
        assert "✔ nvidia_repo: NVIDIA CUDA repository (ubuntu2404)" in plan
        assert "▶ driver: nvidia-open-580 580.159.04" in plan
        await feed(app, pilot, [
            ev.ChangeFinished("gpu-b", index=1, title="x", status="failed", seconds=1.0,
                              message="E: [x=1] env A=b ['$y'] [/b]", ts=sc.T0 + 90),
        ])  # fmt: skip
        assert "E: [x=1] env A=b ['$y'] [/b]" in str(app.query_one("#run-plan").render())
        await pilot.press("slash", *"[a=", "enter")
        assert "filter: [a=" in str(app.query_one("#run-head").render())
        assert app.is_running


async def test_a_plan_after_a_reboot_continues_the_count() -> None:
    """After its reboot a host plans again: done changes stay, the new plan is the rest."""
    a, b, c = (sc.change("r", f"step {i}") for i in "abc")
    T = sc.T0

    def run(i: int, total: int, ch: ev.PlannedChange) -> list[ev.Event]:
        title = sc.title(ch)
        return [
            ev.ChangeStarted("gpu-a", index=i, total=total, title=title, ts=T),
            ev.ChangeFinished("gpu-a", index=i, title=title, status="changed", seconds=1, ts=T),
        ]

    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        view = app.query_one(RunView)
        await feed(app, pilot, [
            ev.RunStarted("", command="apply", hosts=sc.HOSTS, ts=T),
            ev.PlanReady("gpu-a", changes=(a, b), ts=T),
            *run(0, 2, a), *run(1, 2, b),
            ev.RebootStarted("gpu-a", reason="load nvidia", ts=T),
            ev.RebootFinished("gpu-a", seconds=3, boot_id="x", ts=T),
            ev.PlanReady("gpu-a", changes=(c,), ts=T),
            # the executor numbers the change after the reboot its own way
            ev.ChangeStarted("gpu-a", index=2, total=2, title=sc.title(c), ts=T),
        ])  # fmt: skip
        assert view.cell_text("gpu-a", STEP) == "[3/3] r: step c"
        assert view.cell_text("gpu-a", PROGRESS).endswith(" 2/3")
        plan = str(app.query_one("#run-plan").render())
        assert "Plan (3 changes)" in plan and "✔ r: step b" in plan and "▶ r: step c" in plan
        await feed(app, pilot, run(2, 2, c)[1:])
        assert view.cell_text("gpu-a", PROGRESS).endswith(" 3/3")


async def test_selected_host_shows_plan_diff_and_live_output() -> None:
    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await feed(app, pilot, sc.run_events())
        view = app.query_one(RunView)
        log = app.query_one("#run-output", Log)
        assert view.selected == "gpu-a"
        plan = str(app.query_one("#run-plan").render())
        assert "cuda-toolkit-13-0" in plan and "+export PATH=/usr/local/cuda/bin:$PATH" in plan

        await pilot.press("down")  # gpu-b: apt is running
        assert view.selected == "gpu-b"
        assert log.lines[-1] == "Unpacking nvidia-driver-580-open (580.159.04-0ubuntu1) ..."
        # Output arriving now shows up while the command runs, split chunks included.
        await feed(app, pilot, [
            ev.CommandOutput("gpu-b", index=1, stream="stdout", text="Setting up nvidia-"),
        ])  # fmt: skip
        assert log.lines[-1].startswith("Unpacking")
        await feed(app, pilot, [
            ev.CommandOutput("gpu-b", index=1, stream="stdout", text="dkms ...\nDone\n"),
        ])  # fmt: skip
        assert log.lines[-2:] == ["Setting up nvidia-dkms ...", "Done"]
        # Another host's output does not leak into the selected host's log.
        await feed(app, pilot, [ev.CommandOutput("gpu-d", index=0, stream="stdout", text="x\n")])
        assert "x" not in log.lines


async def test_filter_hides_hosts_and_escape_clears_it() -> None:
    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await feed(app, pilot, sc.run_events())
        view = app.query_one(RunView)
        await pilot.press("slash", "b")
        assert view.rows() == ["gpu-b"]
        await pilot.press("backspace", *"*-[cd]")
        assert view.rows() == ["gpu-c", "gpu-d"]
        await pilot.press("enter")
        assert view.rows() == ["gpu-c", "gpu-d"]  # enter keeps the filter
        await pilot.press("slash", "escape")
        assert view.rows() == list(sc.HOSTS)


async def test_retry_calls_back_with_failed_and_unreachable_hosts() -> None:
    asked: list[list[str]] = []
    app = make_app(on_retry=asked.append)
    async with app.run_test(size=(150, 45)) as pilot:
        await feed(app, pilot, sc.run_events() + sc.finish_events())
        await pilot.press("r")
        assert asked == [["gpu-b", "gpu-c"]]
        view = app.query_one(RunView)
        assert view.cell_text("gpu-b", STATUS) == "waiting"
        assert view.cell_text("gpu-a", STATUS) == "changed"
        assert view.state.running and app.query_one("#run-recap").display is False
        # The caller's new events drive the retried hosts again.
        await feed(app, pilot, [
            ev.HostFinished("gpu-b", status="ok", ok=4, seconds=3.0, ts=sc.T0 + 100),
            ev.HostFinished("gpu-c", status="ok", ok=4, seconds=3.0, ts=sc.T0 + 100),
            ev.RunFinished("", exit_code=0, seconds=5.0, ts=sc.T0 + 100, hosts=(
                ev.HostRecap("gpu-b", "ok", ok=4, seconds=3.0),
                ev.HostRecap("gpu-c", "ok", ok=4, seconds=3.0),
            )),
        ])  # fmt: skip
        assert view.cell_text("gpu-b", STATUS) == "ok"
        # the recap is the runs' own: the retried hosts' new lines, the others' first ones
        recap = str(app.query_one("#run-recap").render())
        assert "exit 0" in recap, recap
        lines = {ln.split()[1]: ln.split()[2] for ln in recap.splitlines()[1:]}
        assert lines == {"gpu-a": "changed", "gpu-b": "ok", "gpu-c": "ok", "gpu-d": "changed"}
        await pilot.press("r")
        assert len(asked) == 1  # nothing left to retry


async def test_quit_asks_while_running_and_not_after() -> None:
    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await feed(app, pilot, sc.run_events())
        await pilot.press("q")
        assert app.screen.__class__.__name__ == "ConfirmQuit"
        await pilot.press("n")
        assert app.screen.__class__.__name__ != "ConfirmQuit"
        assert app.is_running
        await pilot.press("q", "y")
    assert app.return_value == 130

    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await feed(app, pilot, sc.run_events() + sc.finish_events())
        await pilot.press("q")
    assert app.return_value == 2  # the run's exit code


async def test_help_lists_the_keys() -> None:
    app = make_app()
    async with app.run_test(size=(150, 45)) as pilot:
        await pilot.press("question_mark")
        assert app.screen.__class__.__name__ == "HelpScreen"
        text = str(app.screen.query_one("#help-text").render())
        assert "retry the failed and unreachable hosts" in text
        await pilot.press("escape")
        assert app.screen.__class__.__name__ != "HelpScreen"


async def test_events_from_another_thread() -> None:
    bus = ev.Bus()
    app = make_app()
    bus.subscribe(app.post_event)
    async with app.run_test(size=(150, 45)) as pilot:
        t = threading.Thread(target=lambda: [bus.emit(e) for e in sc.run_events()])
        t.start()
        t.join()
        await feed(app, pilot, [])
        assert app.query_one(RunView).cell_text("gpu-c", STATUS) == "unreachable"
        assert isinstance(app.screen, RunScreen)
        assert app.screen.events_applied == len(sc.run_events())


async def test_on_ready_starts_the_callers_work_which_emits_events() -> None:
    bus = ev.Bus()
    started = threading.Event()

    def work() -> None:
        started.set()
        for e in sc.run_events():
            bus.emit(e)

    app = make_app(on_ready=lambda: threading.Thread(target=work, daemon=True).start())
    bus.subscribe(app.post_event)
    async with app.run_test(size=(150, 45)) as pilot:
        assert started.wait(5)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        for _ in range(50):
            if screen.events_applied == len(sc.run_events()):
                break
            await pilot.pause(0.05)
        assert app.query_one(RunView).cell_text("gpu-d", STATUS) == "rebooting"
