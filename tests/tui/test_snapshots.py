"""SVG snapshots of each view at a fixed size with deterministic data.

Update after an intended change: pytest tests/tui/test_snapshots.py --snapshot-update
The screenshots in docs/monitoring.md are these SVGs as PNG. rsvg-convert collapses the runs of spaces
(non-breaking ones included) unless told to keep them, which shifts columns, so:
  sed 's/<svg /<svg xml:space="preserve" /' SNAPSHOT.svg | rsvg-convert -w 1500 -o docs/img/X.png
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from gpunode.tui.app import GpunodeApp
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
