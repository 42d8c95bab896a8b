"""Host text in the TUI is shown as written and inert: a process named `[/x]` or
`[link=...]` is no markup (no crash, no live link), and escape sequences, C1 controls and
bidi overrides in process, GPU and host-output text show escaped (top, apply's run, GPU
and smoke tabs)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Log, Static

from gpunode import events as ev
from gpunode.monitor import GpuProcess
from gpunode.safetext import printable
from gpunode.tui.app import GpunodeApp
from gpunode.tui.gpu_view import GpuView
from tests.test_terminal_text import HOSTILE, OSC8
from tests.tui import scenario as sc

MARKUP = "python [/x] [link=https://evil.example/]click[/link] [bold red]x"


def renamed(sample: Any, name: str) -> Any:
    """A scenario sample under another GPU name."""
    if hasattr(sample, "model_copy"):
        return sample.model_copy(update={"name": name})
    return dataclasses.replace(sample, name=name)


def _board() -> Any:
    board = sc.board()
    ts = sc.clock()
    board.add_samples(
        "gpu-a", [renamed(sc.samples("gpu-a", 1, 0, ts)[0], f"NVIDIA {HOSTILE} [/x]")]
    )
    board.set_processes("gpu-a", [
        GpuProcess("gpu-a", 0, 4242, f"alice{OSC8}", 1, MARKUP),
        GpuProcess("gpu-a", 0, 4343, "[/bold]", 1, HOSTILE),
    ])  # fmt: skip
    board.set_status("gpu-c", "stale", f"retry in 4s: nvidia-smi ended: {HOSTILE} [/x]")
    return board


def _inert(cell: object, where: str) -> str:
    assert isinstance(cell, Text), f"{where}: {cell!r} is no Text: it would be read as markup"
    bad = {hex(ord(ch)) for ch in cell.plain if not (ch.isprintable() or ch in "\n\t")}
    assert not bad, f"{where}: raw controls {bad} in {cell.plain!r}"
    styles = [cell.style, *(s.style for s in cell.spans)]
    links = [s for s in styles if (Style.parse(s) if isinstance(s, str) else s).link]
    assert not links, f"{where}: a live link {links}"
    return cell.plain


def _every_cell(app: GpunodeApp) -> list[str]:
    """Every cell of every table and every text pane on the screen, checked inert."""
    shown = []
    for table in app.screen.query(DataTable):
        for r in range(table.row_count):
            for c, cell in enumerate(table.get_row_at(r)):
                shown.append(_inert(cell, f"#{table.id} row {r} col {c}"))
    for static in app.screen.query(Static):
        content = static.render()
        if isinstance(content, Text):
            shown.append(_inert(content, f"#{static.id}"))
    for log in app.screen.query(Log):
        shown += [_inert(Text(line), f"#{log.id}") for line in log.lines]
    return shown


def escaped(text: str) -> tuple[str, str]:
    """`text` as the TUI may show it: every control escaped, or with the ones Rich's Text
    drops itself (BEL, BS, VT, FF, CR) dropped and the rest escaped."""
    return printable(text), printable("".join(ch for ch in text if ch not in "\a\b\v\f\r"))


def shows(shown: str, *parts: str) -> bool:
    """Each of `parts` (host text) appears escaped in `shown`, in order, one after another."""
    options = [""]
    for part in parts:
        options = [o + e for o in options for e in escaped(part)]
    return any(o in shown for o in options)


async def settle(pilot: Pilot[int]) -> None:
    await pilot.pause(0.2)


async def test_top_shows_hostile_process_and_gpu_names_as_written() -> None:
    app = GpunodeApp(mode="top", board=_board(), clock=sc.clock, gpu_interval=0.05)
    async with app.run_test(size=(150, 40)) as pilot:
        await settle(pilot)
        overview = "\n".join(_every_cell(app))
        assert shows(overview, "retry in 4s: nvidia-smi ended: ", HOSTILE)
        await pilot.press("o")  # gpu-a, with its processes
        await settle(pilot)
        gv = app.query_one(GpuView)
        assert gv.mode == "host" and gv.host == "gpu-a"
        cells = _every_cell(app)
        assert MARKUP in cells  # literally, brackets and all
        assert "[/bold]" in cells and printable(HOSTILE) in cells
        assert "alice" + printable(OSC8) in cells
        assert shows("\n".join(cells), HOSTILE, " [/x]")


async def test_apply_tabs_show_hostile_output_inert() -> None:
    app = GpunodeApp(hosts=sc.HOSTS, board=_board(), clock=sc.clock, gpu_interval=0.05)
    async with app.run_test(size=(150, 40)) as pilot:
        plan = (sc.change("driver", f"pkg {MARKUP}", "apt-get install -y x"),)
        for e in (
            ev.RunStarted("", command="apply lab.yaml", hosts=sc.HOSTS, ts=sc.T0),
            ev.PlanReady("gpu-a", changes=plan, ts=sc.T0 + 1),
            ev.ChangeStarted("gpu-a", index=1, total=1, title=sc.title(plan[0]), ts=sc.T0 + 2),
            ev.CommandOutput("gpu-a", index=1, stream="stdout", text=f"{HOSTILE}\n{MARKUP}\n",
                             ts=sc.T0 + 3),
            ev.ChangeFinished("gpu-a", index=1, title=sc.title(plan[0]), status="failed",
                              seconds=1.0, message=f"dpkg: {HOSTILE} {MARKUP}", ts=sc.T0 + 4),
            ev.HostFinished("gpu-a", status="failed", failed=1, seconds=4.0,
                            message=f"dpkg: {HOSTILE} {MARKUP}", ts=sc.T0 + 4),
            ev.SmokeResult("gpu-b", result=ev.SmokeCheck(name="nvidia-smi", status="fail",
                                                         reason=f"{HOSTILE} {MARKUP}")),
            ev.DoctorFinding("gpu-b", "gpu.xid", "error", "Xid 79",
                             f"NVRM: Xid (PCI:0000:00:06): 79, {HOSTILE} [/x]", "reboot"),
        ):  # fmt: skip
            app.post_event(e)
        await settle(pilot)
        run = "\n".join(_every_cell(app))
        assert shows(run, f"dpkg: {HOSTILE} {MARKUP}")
        assert MARKUP in run.splitlines()
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        assert MARKUP in _every_cell(app)
        await pilot.press("3")
        await settle(pilot)
        smoke = "\n".join(_every_cell(app))
        assert shows(smoke, f"{HOSTILE} {MARKUP}")
        assert shows(smoke, f"79, {HOSTILE} [/x]")
