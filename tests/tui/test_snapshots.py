"""SVG snapshots of each view at a fixed size with deterministic data.

Update after an intended change: pytest tests/tui/test_snapshots.py --snapshot-update
The screenshots in docs/monitoring.md are these SVGs as PNG. rsvg-convert collapses the runs of
spaces (non-breaking ones included) unless told to keep them, which shifts columns, so:
  sed 's/<svg /<svg xml:space="preserve" /' SNAPSHOT.svg | rsvg-convert -w 1500 -o docs/img/X.png
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from gpunode.tui.app import GpunodeApp
from gpunode.tui.gpu_view import GpuView
from gpunode.tui.smoke_view import SmokeView
from tests.tui import scenario as sc

SIZE = (150, 42)


def run_app() -> GpunodeApp:
    app = GpunodeApp(
        hosts=sc.HOSTS,
        board=sc.board(),
        clock=sc.clock,
        title="gpunode apply · fleet",
        fleet="fleet",
    )
    for e in sc.run_events():
        app.post_event(e)
    return app


async def settle(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, GpunodeApp)
    while app._inbox:
        await pilot.pause(0.05)
    await pilot.pause(0.6)


def test_run_view_mid_run(snap_compare: Any) -> None:
    async def before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("down")  # gpu-b: plan and live apt output

    assert snap_compare(run_app(), terminal_size=SIZE, run_before=before)


def test_run_view_recap(snap_compare: Any) -> None:
    app = run_app()
    for e in sc.finish_events():
        app.post_event(e)
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_gpu_view_lab_overview(snap_compare: Any) -> None:
    app = GpunodeApp(
        mode="top", board=sc.board(), clock=sc.clock, title="gpunode top · fleet", fleet="fleet"
    )
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_gpu_view_one_host(snap_compare: Any) -> None:
    app = GpunodeApp(
        mode="top", board=sc.board(), clock=sc.clock, title="gpunode top · fleet", fleet="fleet"
    )

    async def before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_smoke_view(snap_compare: Any) -> None:
    app = run_app()
    for e in sc.smoke_events():
        app.post_event(e)

    async def before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_smoke_screen(snap_compare: Any) -> None:
    app = GpunodeApp(mode="smoke", hosts=sc.HOSTS, board=sc.board(), clock=sc.clock,
                     title="gpunode smoke · fleet", fleet="fleet")  # fmt: skip
    for e in sc.smoke_run_events(finished=False):
        app.post_event(e)

    async def before(pilot: Pilot[Any]) -> None:
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


# At 80x24 every screen keeps the host and its state: columns drop by priority, the host
# stays pinned while the table scrolls sideways, the smoke reason is whole under the table.
SMALL = (80, 24)


def shown(pilot: Pilot[Any], table: str) -> list[str]:
    t = pilot.app.query_one(f"#{table}", DataTable)
    return [str(c.label) for c in t.columns.values()]


def test_run_view_at_80x24(snap_compare: Any) -> None:
    async def before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        assert shown(pilot, "run-table") == ["", "host", "status", "progress", "ok", "chg",
                                             "fail", "time"]  # fmt: skip
        assert pilot.app.query_one("#run-table", DataTable).fixed_columns == 2

    assert snap_compare(run_app(), terminal_size=SMALL, run_before=before)


NO_DRIVER = (
    "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


def test_gpu_view_overview_at_80x24(snap_compare: Any) -> None:
    board = sc.board()
    board.set_status("gpu-c", "unreadable", NO_DRIVER)  # SSH works, nvidia-smi cannot read
    app = GpunodeApp(
        mode="top", board=board, clock=sc.clock, title="gpunode top · fleet", fleet="fleet"
    )

    async def before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        assert shown(pilot, "gpu-table") == ["", "host", "util%", "mem%", "max°C", "power W",
                                             "state"]  # fmt: skip
        view = pilot.app.query_one("#gpus", GpuView)
        assert view.cell_text("gpu-c", 10).startswith("unreadable nvidia-smi: NVIDIA-SMI")
        await pilot.press("down", "down")  # gpu-c: its state whole under the table
        await settle(pilot)
        detail = str(pilot.app.query_one("#gpu-detail", Static).render())
        assert NO_DRIVER in " ".join(detail.split())

    assert snap_compare(app, terminal_size=SMALL, run_before=before)


def test_gpu_view_one_host_at_80x24(snap_compare: Any) -> None:
    app = GpunodeApp(
        mode="top", board=sc.board(), clock=sc.clock, title="gpunode top · fleet", fleet="fleet"
    )

    async def before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        assert "host" not in shown(pilot, "gpu-table")  # one host: its name and state on top
        assert {"GPU", "util%", "mem%", "°C", "power W"} <= set(shown(pilot, "gpu-table"))

    assert snap_compare(app, terminal_size=SMALL, run_before=before)


def test_smoke_view_at_80x24(snap_compare: Any) -> None:
    app = run_app()
    for e in sc.smoke_events():
        app.post_event(e)

    async def before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        assert shown(pilot, "smoke-table") == ["", "host", "test", "status", "time", "reason"]
        await pilot.press("down")
        await settle(pilot)
        view = pilot.app.query_one("#smoke-view", SmokeView)
        row = view.rows()[view._sync.table.cursor_row]
        detail = str(pilot.app.query_one("#smoke-detail", Static).render())
        assert view.cell_text(row, 7) in " ".join(detail.split())  # the whole reason

    assert snap_compare(app, terminal_size=SMALL, run_before=before)
