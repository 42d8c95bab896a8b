"""Run view: one row per host advancing live, the selected host's plan, diff and output."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Log, Static

from gpunode.safetext import printable
from gpunode.tui.filtering import matches
from gpunode.tui.fmt import bar, elapsed, inert, mark
from gpunode.tui.runstate import HostProgress, RunState, Step
from gpunode.tui.tablesync import Cell, TableSync
from gpunode.tui.tableview import TableView

# (label, width, priority): host and status always; then the counts, progress, the step.
COLUMNS = (
    ("", 1, 0),
    ("host", 16, 0),
    ("status", 11, 0),
    ("step", 34, 3),
    ("progress", 18, 2),
    ("ok", 3, 1),
    ("chg", 3, 1),
    ("fail", 4, 1),
    ("time", 6, 1),
)


def host_cells(h: HostProgress, now: float) -> list[Cell]:
    m, style = mark(h.status)
    step = h.step or (h.message if h.final else h.detail)
    progress = f"{bar(h.done, h.total)} {h.done}/{h.total}" if h.total else ""
    return [
        Text(m, style=style),
        h.name,
        Text(h.status, style=style),
        Text(step, style="red" if h.status in ("failed", "unreachable") else ""),
        progress,
        Text(str(h.ok), justify="right"),
        Text(str(h.changed), justify="right", style="yellow" if h.changed else ""),
        Text(str(h.failed), justify="right", style="bold red" if h.failed else ""),
        Text(elapsed(h.elapsed(now)), justify="right"),
    ]


# a plan entry's status -> its mark and style (a failed change is a red cross, never a check)
STEP_MARKS: dict[str, tuple[str, str]] = {
    "": ("·", ""),
    "running": ("▶", "bold cyan"),
    "ok": ("✔", "green"),
    "changed": ("✔", "green"),
    "skipped": ("–", "dim"),
    "failed": ("✘", "bold red"),
    "unreachable": ("⊘", "bold red"),
    "rebooting": ("↻", "bold magenta"),
    "rebooted": ("✔", "green"),
}


def step_mark(step: Step) -> tuple[str, str]:
    return STEP_MARKS.get(step.status, ("?", ""))


def plan_text(h: HostProgress) -> Text:
    """The selected host's status, plan and diffs. Built as Text, never markup: commands
    and messages are full of brackets and `=` that a markup parser would take for tags."""
    out = Text()
    out.append(h.name, "bold").append(f"  {h.status}  {h.detail}".rstrip())
    if h.message:
        out.append("\n").append(h.message, "red")
    if h.refused:
        out.append("\n").append(f"refused: {h.refused}", "red")
    if h.steps:
        n = h.total
        out.append("\n").append("Plan", "bold").append(f" ({n} change{'s' if n != 1 else ''})")
        for step in h.steps:
            m, style = step_mark(step)
            out.append("\n ").append(m, style).append(f" {step.change.title}")
    elif h.status not in ("waiting", "connecting", "gathering"):
        out.append("\n").append("no changes planned", "dim")
    for title, diff in h.diffs:
        out.append("\n").append("Diff", "bold").append(f" {title}")
        for dl in diff.splitlines():
            style = "green" if dl.startswith("+") else "red" if dl.startswith("-") else "dim"
            out.append("\n").append(dl, style)
    return inert(out)


def recap_text(state: RunState) -> Text:
    rows = state.recap()
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    took = elapsed(state.seconds) if state.seconds is not None else ""
    out = Text()
    out.append("Recap", "bold").append(f"  exit {state.exit_code}  ·  {took}  ·  {summary}")
    for r in rows:
        m, style = mark(r.status)
        out.append("\n ").append(f"{m} {r.host:<16} {r.status:<11}", style)
        out.append(f" ok={r.ok:<3} changed={r.changed:<3} failed={r.failed:<3}")
        if r.message and r.status != "ok":
            out.append("  ").append(r.message, "dim")
    return inert(out)


class RunView(TableView):
    def __init__(
        self,
        state: RunState,
        *,
        clock: Callable[[], float] = time.time,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.state = state
        self.clock = clock
        self.filter = ""
        self.selected: str | None = None
        self._seen = 0

    def compose(self) -> ComposeResult:
        yield Static(id="run-head")
        yield DataTable(id="run-table", cursor_type="row")
        with Horizontal(id="run-detail"):
            with VerticalScroll(id="run-plan-scroll"):
                yield Static(id="run-plan")
            yield Log(id="run-output", max_lines=5000)
        yield Static(id="run-recap")

    def on_mount(self) -> None:
        self._table: DataTable[Any] = self.query_one("#run-table", DataTable)
        self._sync = TableSync(self._table, COLUMNS, pinned=2)
        self.fit_columns()
        self._output = self.query_one("#run-output", Log)
        # Held, not looked up per event: a timer may still fire while the screen is torn down.
        self._head = self.query_one("#run-head", Static)
        self._plan = self.query_one("#run-plan", Static)
        self._recap = self.query_one("#run-recap", Static)
        self._recap.display = False
        self.rebuild()
        self.set_interval(1.0, self.tick)

    # -- updates (called by the screen after it applied events) ---------------------------

    def rebuild(self) -> None:
        now = self.clock()
        rows = [
            (h.name, host_cells(h, now))
            for h in self.state.hosts.values()
            if matches(h.name, self.filter)
        ]
        self._sync.sync(rows, follow=self.selected)
        if self.selected is None or self.selected not in self._sync.ids:
            self._select(self._sync.current_id())
        self._update_head()

    def update_hosts(self, names: set[str]) -> None:
        if not names:
            return
        now = self.clock()
        for name in names:
            if name not in self._sync.ids:
                if name in self.state.hosts and matches(name, self.filter):
                    self.rebuild()  # a host we had not seen: rebuild once
                    return
                continue
            pos = self._sync.ids.index(name)
            cells = host_cells(self.state.hosts[name], now)
            self._sync.sync_row(pos, cells)
        if self.selected in names:
            self._plan.update(plan_text(self.state.hosts[self.selected]))
        self._update_head()

    def tick(self) -> None:
        """Once a second: elapsed times of hosts still at work."""
        now = self.clock()
        for pos, name in enumerate(self._sync.ids):
            h = self.state.hosts[name]
            if h.started is not None and not h.final:
                self._sync.sync_row(pos, host_cells(h, now))

    def sync_output(self) -> None:
        """Write the selected host's new output lines (live, as they arrive)."""
        h = self.state.hosts.get(self.selected or "")
        if h is None:
            return
        lines = h.lines_since(self._seen)
        if lines:
            self._output.write_lines([printable(ln, lines=True) for ln in lines])
        self._seen = h.lines_total

    def show_recap(self) -> None:
        recap = self._recap
        if self.state.running or self.state.exit_code is None:
            recap.display = False
            return
        recap.update(recap_text(self.state))
        recap.display = True

    def _update_head(self) -> None:
        s = self.state
        n = len(s.hosts)
        final = sum(1 for h in s.hosts.values() if h.final)
        verb = "running" if s.running else ("finished" if s.exit_code is not None else "waiting")
        head = Text()
        head.append(s.command or "run", "bold").append(f"  {verb}  ·  {final}/{n} hosts done")
        if self.filter:
            head.append(f"  ·  filter: {self.filter}")
        self._head.update(inert(head))

    # -- selection -----------------------------------------------------------------------

    def _select(self, name: str | None) -> None:
        if name == self.selected and name is not None:
            return
        self.selected = name
        self._output.clear()
        self._seen = 0
        plan = self._plan
        if name is None or name not in self.state.hosts:
            plan.update("")
            return
        h = self.state.hosts[name]
        plan.update(plan_text(h))
        self.sync_output()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "run-table":
            self._select(self._sync.current_id())

    def set_filter(self, text: str) -> None:
        self.filter = text
        self.rebuild()

    def rows(self) -> list[str]:
        return list(self._sync.ids)

    def cell_text(self, host: str, col: int) -> str:
        value: Any = self._sync.cell(host, col)
        return value.plain if isinstance(value, Text) else str(value)
