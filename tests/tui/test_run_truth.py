"""The run view tells what the executor did: a failed change is a red cross and no progress,
and through every re-plan (after the repository is configured, after a reboot) the progress
bar, the step's number, the per-host counts and the recap say the same.

The events are those gpunode.execute.host.HostRun emits (scenario.Executor), the recap is
the executor's own HostResult.recap(); the assertions read the rendered screen."""

from __future__ import annotations

import re

from textual.content import Content

from gpunode import events as ev
from gpunode.tui.app import GpunodeApp
from gpunode.tui.run_view import RunView
from tests.tui import scenario as sc
from tests.tui.test_run_view import feed

HOST = "gpu-a"
STATUS, STEP, PROGRESS, OK, CHG, FAIL = 2, 3, 4, 5, 6, 7


def changes(*names: str) -> tuple[ev.PlannedChange, ...]:
    return tuple(sc.change("cuda", n, f"apt-get install -y {n}") for n in names)


def reboot(reason: str) -> ev.PlannedChange:
    """The plan's last entry when a change needs a reboot, as planner._order makes it."""
    return ev.PlannedChange(role="driver", task="reboot", op="reboot", reason=reason, reboot=True)


def progress(view: RunView, host: str = HOST) -> tuple[int, int]:
    m = re.fullmatch(r"[█░]+ (\d+)/(\d+)", view.cell_text(host, PROGRESS))
    assert m, view.cell_text(host, PROGRESS)
    return int(m[1]), int(m[2])


def counts(view: RunView) -> tuple[int, int, int]:
    return tuple(int(view.cell_text(HOST, c)) for c in (OK, CHG, FAIL))  # type: ignore[return-value]


def plan_marks(app: GpunodeApp) -> dict[str, tuple[str, str]]:
    """Each plan line's title -> its mark and the mark's style, as the plan pane renders it."""
    content = app.query_one("#run-plan").render()
    assert isinstance(content, Content)
    text, out = content.plain, {}
    start = 0
    for line in text.split("\n"):
        if line.startswith(" ") and len(line) > 3:
            at = start + 1
            style = " ".join(str(s.style) for s in content.spans if s.start <= at < s.end)
            out[line[3:]] = (line[1], style)
        start += len(line) + 1
    return out


def agrees(view: RunView, recap: ev.HostRecap, *, skipped: int = 0) -> None:
    """The bar counts what the recap counts: changed (and skipped) changes, failed ones not;
    the row's ok/chg/fail are the recap's."""
    done, _ = progress(view)
    assert done == recap.changed + skipped, (done, recap)
    assert counts(view) == (recap.ok, recap.changed, recap.failed), (counts(view), recap)
    text = str(view.app.query_one("#run-recap").render())
    assert f"ok={recap.ok:<3} changed={recap.changed:<3} failed={recap.failed:<3}" in text, text


def app() -> GpunodeApp:
    return GpunodeApp(hosts=(HOST,), clock=sc.clock)


async def test_a_failed_change_is_a_red_cross_and_no_progress() -> None:
    a, b, c = changes("a", "b", "c")
    ex = sc.Executor(HOST)
    ex.read(a, b, c)
    assert not ex.apply(fail=b.title)
    tui = app()
    async with tui.run_test(size=(150, 45)) as pilot:
        view = tui.query_one(RunView)
        await feed(tui, pilot, [sc.started(ex), *ex.take()])
        # before the run's end: b failed, the bar has a's change only
        assert view.cell_text(HOST, STATUS) == "failed"
        assert progress(view) == (1, 3)
        assert counts(view) == (0, 1, 1)
        marks = plan_marks(tui)
        assert marks[a.title][0] == "✔" and "green" in marks[a.title][1]
        assert marks[b.title][0] == "✘" and "red" in marks[b.title][1], marks
        assert marks[c.title][0] == "·"

        await feed(tui, pilot, sc.ended(ex))
        agrees(view, ex.result.recap())
        assert progress(view) == (1, 3)
        assert plan_marks(tui)[b.title][0] == "✘"


async def test_a_host_that_fails_before_any_change_counts_one_failure_as_the_recap() -> None:
    ex = sc.Executor(HOST)
    ex.read(*changes("a"))
    ex.result.status, ex.result.message = "failed", "become: none, and ubuntu is not root"
    tui = app()
    async with tui.run_test(size=(150, 45)) as pilot:
        view = tui.query_one(RunView)
        await feed(tui, pilot, [sc.started(ex), *ex.take(), *sc.ended(ex)])
        assert ex.result.recap().failed == 1
        agrees(view, ex.result.recap())
        assert progress(view) == (0, 1)


async def test_a_reboot_then_a_plan_with_one_more_change_counts_as_the_recap() -> None:
    """A driver plan: three changes and the reboot; after the reboot the host plans one
    change more. The bar never counts the reboot, and its numbers are the executor's."""
    a, b, c, d = changes("a", "b", "c", "d")
    ex = sc.Executor(HOST)
    ex.read(a, b, c, reboot("load nvidia 580"))
    tui = app()
    async with tui.run_test(size=(150, 45)) as pilot:
        view = tui.query_one(RunView)
        await feed(tui, pilot, [sc.started(ex), *ex.take()])
        assert progress(view) == (0, 3)  # three changes, the reboot is none
        assert ex.apply()
        for e in ex.take():
            await feed(tui, pilot, [e])
            if isinstance(e, ev.ChangeStarted):  # the row numbers each change as the executor
                assert view.cell_text(HOST, STEP) == f"[{e.index}/{e.total}] {e.title}"
        assert progress(view) == (3, 3)
        ex.reboot("load nvidia 580")
        ex.read(d)
        await feed(tui, pilot, ex.take())
        assert progress(view) == (3, 4)
        marks = plan_marks(tui)
        assert marks["driver: reboot"][0] == "✔", marks
        assert [t for t in marks] == [a.title, b.title, c.title, "driver: reboot", d.title]
        assert "Plan (4 changes)" in str(tui.query_one("#run-plan").render())
        assert ex.apply()
        events = ex.take()
        await feed(tui, pilot, events[:2])
        assert view.cell_text(HOST, STEP) == f"[4/4] {d.title}"
        assert isinstance(events[1], ev.ChangeStarted) and events[1].total == 4
        await feed(tui, pilot, events[2:])
        await feed(tui, pilot, sc.ended(ex))
        recap = ex.result.recap()
        assert (recap.changed, recap.rebooted) == (4, True)
        agrees(view, recap)
        assert progress(view) == (4, 4)


async def test_a_reboot_then_an_empty_plan_keeps_the_count() -> None:
    """The plan said 3 changes and a reboot: 3/3 before the reboot and after it."""
    ex = sc.Executor(HOST)
    ex.read(*changes("a", "b", "c"), reboot("load nvidia 580"))
    assert ex.apply()
    tui = app()
    async with tui.run_test(size=(150, 45)) as pilot:
        view = tui.query_one(RunView)
        await feed(tui, pilot, [sc.started(ex), *ex.take()])
        assert progress(view) == (3, 3)
        ex.reboot("load nvidia 580")
        ex.read()
        await feed(tui, pilot, [*ex.take(), *sc.ended(ex)])
        agrees(view, ex.result.recap())
        assert progress(view) == (3, 3)


async def test_the_plan_after_the_repository_is_configured_continues_the_count() -> None:
    """versions_on_host: the first plan configures the repository, the second (after apt
    update) installs from it and reboots, the third (after the reboot) is empty."""
    repo = changes("keyring", "sources")
    driver = changes("nvidia-open-580", "cuda-toolkit-13-0")
    ex = sc.Executor(HOST)
    ex.read(*repo)
    assert ex.apply()
    ex.read(*driver, reboot("load nvidia 580"))
    tui = app()
    async with tui.run_test(size=(150, 45)) as pilot:
        view = tui.query_one(RunView)
        await feed(tui, pilot, [sc.started(ex), *ex.take()])
        assert progress(view) == (2, 4)
        assert ex.apply()
        events = ex.take()
        await feed(tui, pilot, events[:2])
        start = events[1]
        assert isinstance(start, ev.ChangeStarted) and (start.index, start.total) == (3, 4)
        assert view.cell_text(HOST, STEP) == f"[3/4] {start.title}"
        await feed(tui, pilot, events[2:])
        ex.reboot("load nvidia 580")
        ex.read()
        await feed(tui, pilot, [*ex.take(), *sc.ended(ex)])
        agrees(view, ex.result.recap())
        assert progress(view) == (4, 4)
        assert list(plan_marks(tui)) == [c.title for c in repo + driver] + ["driver: reboot"]


async def test_a_refused_reload_is_skipped_and_the_reboot_it_asks_for_is_shown() -> None:
    a, reload = changes("a", "nvidia reload")
    ex = sc.Executor(HOST)
    ex.read(a, reload)
    assert ex.apply(skip=reload.title)
    ex.reboot("nvidia: reboot: the module could not be unloaded")
    ex.read()
    tui = app()
    async with tui.run_test(size=(150, 45)) as pilot:
        view = tui.query_one(RunView)
        await feed(tui, pilot, [sc.started(ex), *ex.take(), *sc.ended(ex)])
        agrees(view, ex.result.recap(), skipped=1)
        assert progress(view) == (2, 2)
        marks = plan_marks(tui)
        assert marks[reload.title][0] == "–" and marks["reboot"][0] == "✔", marks


async def test_check_counts_every_planned_change_as_the_recap() -> None:
    ex = sc.Executor(HOST)
    ex.read(*changes("a", "b"), reboot("load nvidia 580"))
    ex.check()
    tui = app()
    async with tui.run_test(size=(150, 45)) as pilot:
        view = tui.query_one(RunView)
        await feed(tui, pilot, [sc.started(ex), *ex.take(), *sc.ended(ex)])
        agrees(view, ex.result.recap(), skipped=3)
        assert progress(view) == (3, 3)


async def test_a_host_a_stop_interrupted_is_done_and_marked_so() -> None:
    a, b = changes("a", "b")
    ex = sc.Executor(HOST)
    ex.read(a, b)
    ex.plan = (a,)  # the stop came after a: b never started
    assert ex.apply()
    ex.result.status, ex.result.message = "interrupted", "stopped: SIGINT"
    tui = app()
    async with tui.run_test(size=(150, 45)) as pilot:
        view = tui.query_one(RunView)
        await feed(tui, pilot, [sc.started(ex), *ex.take(), *sc.ended(ex)])
        assert view.cell_text(HOST, STATUS) == "interrupted"
        assert view.cell_text(HOST, 0) == "■"
        assert "1/1 hosts done" in str(tui.query_one("#run-head").render())
        agrees(view, ex.result.recap())
        assert progress(view) == (1, 2)
