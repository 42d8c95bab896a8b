"""The GPU view: overview and host modes, sorting, stale hosts, processes; and the smoke view."""

from __future__ import annotations

from textual.pilot import Pilot

from gpunode.tui.app import GpunodeApp
from gpunode.tui.gpu_view import GpuView
from gpunode.tui.smoke_view import SmokeView
from tests.tui import scenario as sc

UTIL, MEM, TEMP, POWER, STATE = 4, 6, 8, 9, 10
HOST_UTIL, HOST_CLOCK = 3, 9


async def settle(pilot: Pilot[int]) -> None:
    await pilot.pause(0.15)


async def test_overview_one_line_per_host_with_aggregates() -> None:
    board = sc.board()
    app = GpunodeApp(mode="top", board=board, clock=sc.clock, gpu_interval=0.05)
    async with app.run_test(size=(150, 40)) as pilot:
        await settle(pilot)
        gv = app.query_one(GpuView)
        assert gv.mode == "lab" and gv.rows() == list(sc.HOSTS)
        a = board.view("gpu-a")
        mean = sum(g.utilization_pct or 0 for g in a.gpus.values()) / 8
        assert gv.cell_text("gpu-a", 2) == "8x H200"
        assert gv.cell_text("gpu-a", 3) == "580.159.04"
        assert gv.cell_text("gpu-d", 2) == "8x H100 80GB"
        assert gv.cell_text("gpu-d", 3) == "575.57.08"
        assert gv.cell_text("gpu-a", UTIL) == f"{mean:.0f}"
        max_temp = max(g.temperature_c or 0 for g in a.gpus.values())
        assert gv.cell_text("gpu-a", TEMP) == f"{max_temp:.0f}"
        draw = sum(g.power_draw_w or 0 for g in a.gpus.values())
        assert gv.cell_text("gpu-a", POWER) == f"{draw:.0f}/5600"
        used = sum(g.memory_used_mib or 0 for g in a.gpus.values()) / 1024
        assert gv.cell_text("gpu-a", MEM) == f"{used:.1f}/{8 * 143771 / 1024:.1f}"
        assert len(gv.cell_text("gpu-a", 5).strip()) == 20  # a full sparkline


async def test_stale_host_keeps_last_values_and_is_marked() -> None:
    board = sc.board()
    app = GpunodeApp(mode="top", board=board, clock=sc.clock, gpu_interval=0.05)
    async with app.run_test(size=(150, 40)) as pilot:
        await settle(pilot)
        gv = app.query_one(GpuView)
        assert gv.cell_text("gpu-c", 0) == "◌"
        assert gv.cell_text("gpu-c", STATE).startswith(
            "stale 16s ago · retry in 4s: nvidia-smi ended"
        )
        assert gv.cell_text("gpu-c", 2) == "8x H200"  # last values kept
        assert gv.cell_text("gpu-a", 0) == "●" and gv.cell_text("gpu-a", STATE).startswith("live")


async def test_host_quiet_turns_stale_without_any_new_event() -> None:
    now = [sc.clock()]
    board = sc.board()
    board.clock = lambda: now[0]
    app = GpunodeApp(mode="top", board=board, clock=lambda: now[0], gpu_interval=0.05)
    async with app.run_test(size=(150, 40)) as pilot:
        await settle(pilot)
        gv = app.query_one(GpuView)
        assert gv.cell_text("gpu-a", 0) == "●"
        now[0] += 30  # nothing arrives for 30 s
        await settle(pilot)
        assert gv.cell_text("gpu-a", 0) == "◌"
        assert gv.cell_text("gpu-a", STATE).startswith("stale 31s ago")


async def test_sort_by_column_keys_and_header_click() -> None:
    board = sc.board()
    app = GpunodeApp(mode="top", board=board, clock=sc.clock, gpu_interval=0.05)
    async with app.run_test(size=(150, 40)) as pilot:
        await settle(pilot)
        gv = app.query_one(GpuView)
        utils = {h: float(gv.cell_text(h, UTIL)) for h in sc.HOSTS}
        await pilot.click("#gpu-table", offset=(51, 0))  # the util% header
        await settle(pilot)
        assert gv.sort_key() == ("util", True)
        assert gv.rows() == sorted(sc.HOSTS, key=lambda h: (utils[h], h), reverse=True)
        await pilot.press("S")
        assert gv.rows() == sorted(sc.HOSTS, key=lambda h: (utils[h], h))
        await pilot.press("s")  # next column: util history shares util, so memory
        assert gv.sort_key() == ("mem", True)
        mems = [float(gv.cell_text(h, MEM).split("/")[0]) for h in gv.rows()]
        assert mems == sorted(mems, reverse=True)


async def test_toggle_overview_and_one_host_with_processes() -> None:
    board = sc.board()
    app = GpunodeApp(mode="top", board=board, clock=sc.clock, gpu_interval=0.05)
    async with app.run_test(size=(150, 40)) as pilot:
        await settle(pilot)
        gv = app.query_one(GpuView)
        await pilot.press("o")  # the host under the cursor: gpu-a
        await settle(pilot)
        assert gv.mode == "host" and gv.host == "gpu-a"
        assert gv.rows() == [str(i) for i in range(8)]
        g3 = board.view("gpu-a").gpus[3]
        assert gv.cell_text("3", HOST_UTIL) == f"{g3.utilization_pct:.0f}"
        assert gv.cell_text("3", HOST_CLOCK) == f"{g3.sm_clock_mhz:.0f}"
        procs = app.query_one("#proc-table")
        assert procs.display and procs.row_count == 2  # type: ignore[attr-defined]
        await pilot.press("n")
        assert gv.host == "gpu-b" and not procs.row_count  # type: ignore[attr-defined]
        await pilot.press("o")
        assert gv.mode == "lab" and len(gv.rows()) == 4 and not procs.display
        # Back in the overview the cursor is on the host just shown (gpu-b).
        await pilot.press("down", "enter")
        assert gv.mode == "host" and gv.host == "gpu-c"


async def test_gpu_tab_in_run_view_and_filter() -> None:
    app = GpunodeApp(hosts=sc.HOSTS, board=sc.board(), clock=sc.clock, gpu_interval=0.05)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.press("2")
        await settle(pilot)
        gv = app.query_one(GpuView)
        assert gv.rows() == list(sc.HOSTS)
        await pilot.press("slash", *"gpu-[ab]", "enter")
        await settle(pilot)
        assert gv.rows() == ["gpu-a", "gpu-b"]


async def test_smoke_view_shows_measured_against_expected() -> None:
    app = GpunodeApp(hosts=sc.HOSTS, clock=sc.clock)
    async with app.run_test(size=(150, 40)) as pilot:
        for e in sc.smoke_events():
            app.post_event(e)
        await pilot.press("3")
        await pilot.pause(0.3)
        sv = app.query_one(SmokeView)
        assert sv.rows()[:2] == ["gpu-a/nvidia-smi", "gpu-a/cuda-vectoradd"]
        assert sv.cell_text("gpu-a/torch-matmul", 3) == "warn"
        assert sv.cell_text("gpu-a/torch-matmul", 4) == "412.5 TFLOP/s"
        assert sv.cell_text("gpu-a/torch-matmul", 5) == ">= 500 TFLOP/s"
        assert sv.cell_text("gpu-a/nccl-allreduce", 3) == "fail"
        assert sv.cell_text("gpu-d/tensorflow", 7) == "no tensorflow env"
