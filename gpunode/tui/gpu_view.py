"""GPU view: the fleet's overview (one line per host: its GPU models, driver, load) or one
host's GPUs and processes.

Reads a monitor Board on its own timer; never samples anything itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from gpunode.monitor.board import Board, HostView
from gpunode.monitor.model import GpuSample, LinkStatus
from gpunode.tui.filtering import matches
from gpunode.tui.fmt import gib, inert, mark, num, pct, sparkline
from gpunode.tui.tablesync import Cell, TableSync
from gpunode.tui.tableview import TableView

SPARK_W = 20
SortValue = float | str


@dataclass(frozen=True)
class Col:
    label: str
    width: int  # 0: the room the others leave (tablesync)
    key: str  # sort key name
    priority: int = 1  # 0: always shown; then 1, 2... while they fit (tablesync.fit)


LAB_COLS = (
    Col("", 1, "link", 0),
    Col("host", 16, "host", 0),
    Col("GPUs", 14, "gpus", 2),
    Col("driver", 10, "driver", 3),
    Col("util%", 5, "util"),
    Col("util history", SPARK_W, "util", 4),
    Col("mem GiB used/total", 18, "mem", 3),
    Col("mem%", 4, "mem"),
    Col("max°C", 5, "temp"),
    Col("power W", 11, "power"),
    Col("state", 0, "link", 0),
)
HOST_COLS = (
    Col("", 1, "link", 0),
    Col("GPU", 3, "gpu", 0),
    Col("name", 14, "name", 2),
    Col("util%", 5, "util"),
    Col("util history", SPARK_W, "util", 4),
    Col("mem GiB used/total", 18, "mem", 3),
    Col("mem%", 4, "mem"),
    Col("°C", 3, "temp"),
    Col("power W", 11, "power"),
    Col("SM MHz", 6, "clock", 2),
)
PROC_COLS = (("GPU", 3), ("pid", 8), ("user", 12), ("mem MiB", 8), ("command", 60))
LINK_ORDER = {"unreadable": 0, "down": 0, "stale": 1, "connecting": 2, "live": 3}


def _mean(values: Sequence[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return sum(vs) / len(vs) if vs else None


def _sum(values: Sequence[float | int | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return float(sum(vs)) if vs else None


def _mean_history(history: dict[int, list[float]]) -> list[float]:
    series = [h for h in history.values() if h]
    if not series:
        return []
    n = min(len(s) for s in series)
    return [sum(s[len(s) - n + i] for s in series) / len(series) for i in range(n)]


def _link_text(view: HostView, now: float) -> str:
    link = view.link
    if link == "live":
        return f"live ({view.source})" if view.source else "live"
    if link == "stale":
        age = f" {now - view.last_ts:.0f}s ago" if view.last_ts else ""
        return f"stale{age} · {view.detail}" if view.detail else f"stale{age}"
    return f"{link} {view.detail}".strip()


def _style(link: LinkStatus, value: float | None = None, hot: float = 90.0) -> str:
    if link != "live":
        return "dim"
    if value is not None and value >= hot:
        return "bold"
    return ""


def _power(draw: float | None, limit: float | None) -> str:
    if draw is None and limit is None:
        return "-"
    return f"{num(draw)}/{num(limit)}"


def short_model(name: str) -> str:
    """A GPU's model as the overview names it: "NVIDIA H100 80GB HBM3" -> "H100 80GB"."""
    words = name.removeprefix("NVIDIA ").removeprefix("GeForce ").removeprefix("Tesla ").split()
    return " ".join(words[:2]) or "?"


def gpu_models(gpus: Sequence[GpuSample]) -> str:
    """How many GPUs of each model a host has: "8x H200", "4x A100-SXM4-80GB + 1x L40S"."""
    counts: dict[str, int] = {}
    for g in sorted(gpus, key=lambda g: g.index):
        model = short_model(g.name)
        counts[model] = counts.get(model, 0) + 1
    return " + ".join(f"{n}x {model}" for model, n in counts.items()) if counts else "-"


def drivers(gpus: Sequence[GpuSample]) -> str:
    """The host's driver version (one per host, but each sample says its own)."""
    return "/".join(sorted({g.driver_version for g in gpus if g.driver_version})) or "-"


def lab_row(v: HostView, now: float) -> tuple[dict[str, SortValue], list[Cell]]:
    gpus = list(v.gpus.values())
    util = _mean([g.utilization_pct for g in gpus])
    used = _sum([g.memory_used_mib for g in gpus])
    total = _sum([g.memory_total_mib for g in gpus])
    temp = max((g.temperature_c for g in gpus if g.temperature_c is not None), default=None)
    draw = _sum([g.power_draw_w for g in gpus])
    limit = _sum([g.power_limit_w for g in gpus])
    link = v.link
    st = _style(link)
    m, mstyle = mark(link)
    mem_pct = pct(used, total)
    cells: list[Cell] = [
        Text(m, style=mstyle),
        Text(v.name, style=st),
        Text(gpu_models(gpus), style=st),
        Text(drivers(gpus), style=st),
        Text(num(util), style=_style(link, util), justify="right"),
        Text(sparkline(_mean_history(v.history), SPARK_W), style="dim" if st else "green"),
        Text(f"{gib(used)}/{gib(total)}", style=st, justify="right"),
        Text(num(mem_pct), style=_style(link, mem_pct), justify="right"),
        Text(num(temp), style=_style(link, temp, 85.0), justify="right"),
        Text(_power(draw, limit), style=st, justify="right"),
        Text(_link_text(v, now), style=mstyle if link != "live" else "dim"),
    ]
    keys: dict[str, SortValue] = {
        "link": LINK_ORDER.get(link, 9),
        "host": v.name,
        "gpus": len(gpus),
        "driver": drivers(gpus),
        "util": util if util is not None else -1.0,
        "mem": used if used is not None else -1.0,
        "temp": temp if temp is not None else -1.0,
        "power": draw if draw is not None else -1.0,
    }
    return keys, cells


def gpu_row(
    g: GpuSample, history: list[float], link: LinkStatus
) -> tuple[dict[str, SortValue], list[Cell]]:
    st = _style(link)
    m, mstyle = mark(link)
    mem_pct = pct(g.memory_used_mib, g.memory_total_mib)
    cells: list[Cell] = [
        Text(m, style=mstyle),
        Text(str(g.index), style=st, justify="right"),
        Text(g.name.removeprefix("NVIDIA "), style=st),
        Text(num(g.utilization_pct), style=_style(link, g.utilization_pct), justify="right"),
        Text(sparkline(history, SPARK_W), style="dim" if st else "green"),
        Text(f"{gib(g.memory_used_mib)}/{gib(g.memory_total_mib)}", style=st, justify="right"),
        Text(num(mem_pct), style=_style(link, mem_pct), justify="right"),
        Text(num(g.temperature_c), style=_style(link, g.temperature_c, 85.0), justify="right"),
        Text(_power(g.power_draw_w, g.power_limit_w), style=st, justify="right"),
        Text(num(g.sm_clock_mhz), style=st, justify="right"),
    ]
    keys: dict[str, SortValue] = {
        "link": 0,
        "gpu": g.index,
        "name": g.name,
        "util": g.utilization_pct if g.utilization_pct is not None else -1.0,
        "mem": g.memory_used_mib if g.memory_used_mib is not None else -1.0,
        "temp": g.temperature_c if g.temperature_c is not None else -1.0,
        "power": g.power_draw_w if g.power_draw_w is not None else -1.0,
        "clock": g.sm_clock_mhz if g.sm_clock_mhz is not None else -1.0,
    }
    return keys, cells


class GpuView(TableView):
    """The fleet's overview <-> one host's GPUs (`o`), sorted by any column (`s`, `S`, header
    click). `fleet` names the overview: the inventory's name."""

    HELP_TITLE = "GPUs"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "toggle_mode", "Overview/host", tooltip="the overview <-> one host's GPUs"),
        Binding("s", "cycle_sort", "Sort", tooltip="sort by the next column (or click a header)"),
        Binding("S", "reverse_sort", "Reverse", tooltip="reverse the sort"),
        Binding("n", "next_host", "Next host", show=False, tooltip="one host's GPUs: next host"),
        Binding("p", "prev_host", "Prev host", show=False, tooltip="one host's GPUs: previous"),
    ]
    HELP_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("enter", "open the host under the cursor"),
    )

    mode: reactive[Literal["lab", "host"]] = reactive("lab")

    def __init__(
        self,
        board: Board | None,
        *,
        clock: Callable[[], float] = time.time,
        interval: float = 0.5,
        fleet: str = "",
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.board = board
        self.fleet = fleet
        self.clock = clock
        self.interval = interval
        self.host: str | None = board.hosts[0] if board and board.hosts else None
        self.filter = ""
        self.sort = {"lab": "host", "host": "gpu"}
        self.reverse = {"lab": False, "host": False}
        self._views: dict[str, HostView] = {}
        self._links: dict[str, LinkStatus] = {}
        self.cells_written = 0

    def compose(self) -> ComposeResult:
        yield Static(id="gpu-head")
        if self.board is None:
            yield Static("No GPU monitor for this run.", id="gpu-none")
            return
        yield DataTable(id="gpu-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="gpu-detail")
        yield Static(id="proc-head")
        yield DataTable(id="proc-table", cursor_type="row", show_cursor=False)

    def on_mount(self) -> None:
        if self.board is None:
            self.query_one("#gpu-head", Static).update("GPUs")
            return
        # Held, not looked up per tick: a timer may still fire while the screen is torn down.
        self._head = self.query_one("#gpu-head", Static)
        self._proc_head = self.query_one("#proc-head", Static)
        self._detail = self.query_one("#gpu-detail", Static)
        self._table = self.query_one("#gpu-table", DataTable)
        self._procs = TableSync(self.query_one("#proc-table", DataTable), PROC_COLS)
        self._build_columns()
        self.refresh_data(full=True)
        self.set_interval(self.interval, self._tick)

    def _tick(self) -> None:
        self._refit()
        self.refresh_data()  # looked up per tick, so a caller may wrap it (bench/tui_scale.py)

    @property
    def cols(self) -> tuple[Col, ...]:
        return LAB_COLS if self.mode == "lab" else HOST_COLS

    def _build_columns(self) -> None:
        self._table.clear(columns=True)
        self._sync = TableSync(
            self._table, [(c.label, c.width, c.priority) for c in self.cols], pinned=2
        )
        self.fit_columns()
        host_mode = self.mode == "host"
        self._procs.table.display = host_mode
        self._proc_head.display = host_mode

    def watch_mode(self, old: str, new: str) -> None:
        if self.board is None or not self.is_mounted:
            return
        self._build_columns()
        self.refresh_data(full=True)
        if new == "lab" and self.host in self._sync.ids:
            self._table.move_cursor(row=self._sync.ids.index(self.host), animate=False)

    # -- data ----------------------------------------------------------------------------

    def refresh_data(self, full: bool = False) -> None:
        """Apply what changed on the board since the last call: one redraw per tick."""
        if self.board is None:
            return
        changed = self.board.drain()
        links = self.board.links()
        for host, link in links.items():
            if full or host in changed or self._links.get(host) != link or host not in self._views:
                self._views[host] = self.board.view(host)
        self._links = links
        now = self.clock()
        if self.mode == "lab":
            rows = [lab_row(v, now) for h, v in self._views.items() if matches(h, self.filter)]
            ids = [v.name for v in self._views.values() if matches(v.name, self.filter)]
            keyed = list(zip(ids, rows, strict=True))
        else:
            v = self._views.get(self.host or "")
            keyed = []
            if v is not None:
                keyed = [
                    (str(i), gpu_row(g, v.history.get(i, []), v.link))
                    for i, g in sorted(v.gpus.items())
                ]
        key, rev = self.sort[self.mode], self.reverse[self.mode]
        keyed.sort(key=lambda r: (r[1][0][key], r[0]), reverse=rev)
        self.cells_written += self._sync.sync([(rid, cells) for rid, (_, cells) in keyed])
        self._update_head()
        self._update_detail()
        if self.mode == "host":
            self._update_procs()

    def _update_head(self) -> None:
        col = next(c.label for c in self.cols if c.key == self.sort[self.mode])
        arrow = "↓" if self.reverse[self.mode] else "↑"
        head = Text()
        if self.mode == "lab":
            n_gpu = sum(len(v.gpus) for v in self._views.values())
            live = sum(1 for link in self._links.values() if link == "live")
            head.append(self.fleet or "Overview", "bold")
            head.append(f"  {len(self._views)} hosts ({live} live), {n_gpu} GPUs")
            head.append(f"  ·  sorted by {col or 'status'} {arrow}  ·  ")
            head.append("o: one host  enter: open", "dim")
        else:
            v = self._views.get(self.host or "")
            link = v.link if v else "down"
            m, style = mark(link)
            state = _link_text(v, self.clock()) if v else ""
            head.append(self.host or "", "bold").append("  ").append(f"{m} {state}", style)
            head.append(f"  ·  sorted by {col or 'status'} {arrow}  ·  ")
            head.append("o: overview  n/p: next/prev host", "dim")
        if self.filter:
            head.append(f"  ·  filter: {self.filter}")
        self._head.update(inert(head))

    def _update_detail(self) -> None:
        """The overview's selected host, when it is not live: its state whole, wrapped (the
        state column cuts it: "unreadable nvidia-smi: NVIDIA-SMI has failed because...")."""
        v = self._views.get(self._sync.current_id() or "") if self.mode == "lab" else None
        if v is None or v.link == "live":
            self._detail.display = False
            return
        m, style = mark(v.link)
        text = Text()
        text.append(v.name, "bold").append("  ").append(f"{m} {_link_text(v, self.clock())}", style)
        self._detail.update(inert(text))
        self._detail.display = True

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "gpu-table" and hasattr(self, "_sync"):
            self._update_detail()

    def _update_procs(self) -> None:
        v = self._views.get(self.host or "")
        procs = sorted(v.processes, key=lambda p: (p.gpu, p.pid)) if v else []
        rows: list[tuple[str, Sequence[Cell]]] = [
            (
                f"{p.gpu}:{p.pid}",
                [
                    Text(str(p.gpu) if p.gpu >= 0 else "?", justify="right"),
                    Text(str(p.pid), justify="right"),
                    p.user,
                    Text(num(p.used_mem), justify="right"),
                    p.command,
                ],
            )
            for p in procs
        ]
        self._procs.sync(rows)
        self._proc_head.update(
            Text.assemble(("Processes", "bold"), f" ({len(rows)})" if rows else "  none")
        )

    # -- actions -------------------------------------------------------------------------

    def set_filter(self, text: str) -> None:
        self.filter = text
        if self.board is not None:
            self.refresh_data()

    def show_host(self, host: str) -> None:
        self.host = host
        if self.mode == "host":
            self._sync.clear()
            self.refresh_data(full=True)
        else:
            self.mode = "host"

    def action_toggle_mode(self) -> None:
        if self.board is None:
            return
        if self.mode == "lab":
            self.host = self._sync.current_id() or self.host
            self.mode = "host"
        else:
            self.mode = "lab"

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if self.mode == "lab" and event.data_table.id == "gpu-table":
            rid = self._sync.current_id()
            if rid is not None:
                self.show_host(rid)

    def _step_host(self, step: int) -> None:
        hosts = [h for h in self._views if matches(h, self.filter)]
        if self.mode != "host" or not hosts:
            return
        i = hosts.index(self.host) if self.host in hosts else -step
        self.show_host(hosts[(i + step) % len(hosts)])

    def action_next_host(self) -> None:
        self._step_host(1)

    def action_prev_host(self) -> None:
        self._step_host(-1)

    def _set_sort(self, key: str, flip_if_same: bool) -> None:
        if flip_if_same and self.sort[self.mode] == key:
            self.reverse[self.mode] = not self.reverse[self.mode]
        else:
            self.sort[self.mode] = key
            # Numbers read best largest first; names A to Z.
            self.reverse[self.mode] = key not in ("host", "name", "gpu", "link", "driver")
        self.refresh_data()

    def action_cycle_sort(self) -> None:
        keys: list[str] = []
        for c in self.cols:
            if c.key not in keys:
                keys.append(c.key)
        i = keys.index(self.sort[self.mode])
        self._set_sort(keys[(i + 1) % len(keys)], flip_if_same=False)

    def action_reverse_sort(self) -> None:
        self.reverse[self.mode] = not self.reverse[self.mode]
        self.refresh_data()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        if event.data_table.id != "gpu-table":
            return
        event.stop()
        self._set_sort(self.cols[self._sync.shown[event.column_index]].key, flip_if_same=True)

    def sort_key(self) -> tuple[str, bool]:
        """The column the view sorts by, and whether reversed: for tests and tools."""
        return self.sort[self.mode], self.reverse[self.mode]

    def rows(self) -> list[str]:
        """Row ids in display order (hosts, or GPU indexes): for tests and tools."""
        return list(self._sync.ids) if self.board is not None else []

    def cell_text(self, row_id: str, col: int) -> str:
        value: Any = self._sync.cell(row_id, col)
        return value.plain if isinstance(value, Text) else str(value)
