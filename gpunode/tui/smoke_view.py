"""Smoke view: per host and test, pass/warn/fail/skip, measured value against expected."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from gpunode.events import DoctorFinding, SmokeCheck
from gpunode.tui.filtering import matches
from gpunode.tui.fmt import inert, mark
from gpunode.tui.runstate import RunState
from gpunode.tui.tablesync import Cell, TableSync
from gpunode.tui.tableview import TableView

# (label, width, priority): host, test and status always; the reason takes the room the
# others leave (and the line under the table has the selected row's whole reason).
COLUMNS = (
    ("", 1, 0),
    ("host", 16, 0),
    ("test", 20, 0),
    ("status", 6, 0),
    ("measured", 16, 2),
    ("expected", 16, 3),
    ("time", 6, 2),
    ("reason", 0, 0),
)
REASON = 7


def _value(v: Any, unit: str) -> str:
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        v = f"{v:.4g}"
    return f"{v} {unit}".strip()


def smoke_cells(host: str, result: SmokeCheck) -> list[Cell]:
    status, unit, secs = result.status, result.unit, result.seconds
    m, style = mark(status)
    return [
        Text(m, style=style),
        host,
        result.name,
        Text(status, style=style),
        Text(_value(result.value, unit), justify="right"),
        Text(_value(result.expected, unit), justify="right", style="dim"),
        Text(f"{secs:.1f}s" if secs is not None else "", justify="right"),
        Text(result.reason, style="dim" if status == "pass" else style),
    ]


SEVERITY_MARK = {"error": "fail", "warning": "warn", "info": "skip"}
"""A doctor finding's severity drawn as the smoke status of the same weight."""


def doctor_cells(host: str, f: DoctorFinding) -> list[Cell]:
    """A finding of doctor on a host whose smoke tests failed: its rule, title, evidence, fix."""
    m, style = mark(SEVERITY_MARK[f.severity])
    return [
        Text(m, style=style),
        host,
        f.rule,
        Text(f.severity, style=style),
        "",
        "",
        "",
        Text(f"{f.title}: {f.evidence} · fix: {f.fix}", style=style),
    ]


def unreachable_cells(host: str, reason: str) -> list[Cell]:
    """A host the suite never reached, or lost: no test ran there."""
    m, style = mark("unreachable")
    return [Text(m, style=style), host, Text("unreachable", style=style), "", "", "", "",
            Text(reason, style=style)]  # fmt: skip


class SmokeView(TableView):
    """`unreachable`: a row for each host the run could not reach (smoke's own screen; the
    apply screen's run tab says it already)."""

    def __init__(
        self, state: RunState, *, unreachable: bool = False, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.state = state
        self.unreachable = unreachable
        self.filter = ""

    def compose(self) -> ComposeResult:
        yield Static(id="smoke-head")
        yield DataTable(id="smoke-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="smoke-detail")

    def on_mount(self) -> None:
        self._table: DataTable[Any] = self.query_one("#smoke-table", DataTable)
        self._head = self.query_one("#smoke-head", Static)
        self._detail = self.query_one("#smoke-detail", Static)
        self._sync = TableSync(self._table, COLUMNS, pinned=2)
        self.fit_columns()
        self.rebuild()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "smoke-table":
            self._show_detail()

    def _show_detail(self) -> None:
        """The selected row's whole reason, wrapped: a narrow table cuts its column."""
        row = self._sync.current_id()
        if row is None:
            self._detail.update("")
            return
        host, test, reason = (self._sync.cell(row, i) for i in (1, 2, REASON))
        text = Text()
        text.append(str(host), "bold").append(" · ").append(str(test)).append(": ")
        text.append_text(reason if isinstance(reason, Text) else Text(str(reason)))
        self._detail.update(inert(text))

    def rebuild(self) -> None:
        rows: list[tuple[str, list[Cell]]] = []
        counts: dict[str, int] = {}
        for h in self.state.hosts.values():
            if not matches(h.name, self.filter):
                continue
            for name, result in h.smoke.items():
                rows.append((f"{h.name}/{name}", smoke_cells(h.name, result)))
                st = result.status
                counts[st] = counts.get(st, 0) + 1
            for i, finding in enumerate(h.doctor):
                rows.append((f"{h.name}/doctor/{i}", doctor_cells(h.name, finding)))
            if self.unreachable and h.status == "unreachable":
                rows.append((f"{h.name}/unreachable", unreachable_cells(h.name, h.message)))
                counts["unreachable"] = counts.get("unreachable", 0) + 1
        self._sync.sync(rows)
        self._show_detail()
        head = Text()
        head.append("Smoke tests", "bold")
        for s, n in sorted(counts.items()):
            head.append("  ").append(f"{mark(s)[0]} {n} {s}", mark(s)[1])
        if not counts:
            head.append("  ").append("no results yet", "dim")
        if self.filter:
            head.append(f"  ·  filter: {self.filter}")
        self._head.update(inert(head))

    def set_filter(self, text: str) -> None:
        self.filter = text
        self.rebuild()

    def rows(self) -> list[str]:
        return list(self._sync.ids)

    def cell_text(self, row_id: str, col: int) -> str:
        value: Any = self._sync.cell(row_id, col)
        return value.plain if isinstance(value, Text) else str(value)
