"""Smoke view: per host and test, pass/warn/fail/skip, measured value against expected."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from gpunode.events import DoctorFinding, SmokeCheck
from gpunode.tui.filtering import matches
from gpunode.tui.fmt import inert, mark
from gpunode.tui.runstate import RunState
from gpunode.tui.tablesync import Cell, TableSync

COLUMNS = (
    ("", 1),
    ("host", 16),
    ("test", 20),
    ("status", 6),
    ("measured", 16),
    ("expected", 16),
    ("time", 6),
    ("reason", 60),
)


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


class SmokeView(Vertical):
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

    def on_mount(self) -> None:
        self._table: DataTable[Any] = self.query_one("#smoke-table", DataTable)
        self._head = self.query_one("#smoke-head", Static)
        self._sync = TableSync(self._table, COLUMNS)
        self.rebuild()

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
        value: Any = self._table.get_cell(f"r{self._sync.ids.index(row_id)}", f"c{col}")
        return value.plain if isinstance(value, Text) else str(value)
