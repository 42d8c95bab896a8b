"""Write a list of rows into a DataTable touching only the cells that changed.

Rows are keyed by position, so re-sorting rewrites cells instead of rebuilding
the table, and the cursor follows the row it was on (by the caller's id).

Columns fit the width by priority, not by position: `fit(width)` shows the columns of
priority 0 (the host and its state) always, then the others most important first while
they fit; a column of width 0 takes what is left (at least `FLEX_MIN`). The first
`pinned` columns stay in place while the table scrolls sideways.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from gpunode.tui.fmt import inert

Cell = Text | str
Column = tuple[str, int] | tuple[str, int, int]
"""(label, width, priority): priority 0 is always shown, then 1, 2...; without one, 1.
A width of 0 is flexible: the room the others leave."""
FLEX_MIN = 16
PADDING = 2  # a DataTable cell's padding, one each side
SCROLLBAR = 2  # what a table's vertical scrollbar takes of a view's width


class TableSync:
    def __init__(
        self, table: DataTable[Any], columns: Sequence[Column], *, pinned: int = 0
    ) -> None:
        self.table = table
        self.ids: list[str] = []
        self._cells: list[list[Cell]] = []
        self._ncols = len(columns)
        self.columns = [(c[0], c[1], c[2] if len(c) > 2 else 1) for c in columns]
        self.pinned = pinned
        self.shown = list(range(self._ncols))
        self._widths = [w or FLEX_MIN for _, w, _ in self.columns]
        self._add_columns()

    def _add_columns(self) -> None:
        for i in self.shown:
            self.table.add_column(self.columns[i][0], width=self._widths[i], key=f"c{i}")
        self.table.fixed_columns = min(self.pinned, len(self.shown))

    def fit(self, width: int) -> bool:
        """Show the columns that fit `width` cells, by priority; the rows are rewritten
        when the set changes. Returns whether it changed."""
        flex = [i for i, (_, w, _) in enumerate(self.columns) if w == 0]
        need = {i: (w or FLEX_MIN) + PADDING for i, (_, w, _) in enumerate(self.columns)}
        order = sorted(range(self._ncols), key=lambda i: (self.columns[i][2], i))
        used, chosen = 0, set()
        for i in order:
            if self.columns[i][2] == 0 or used + need[i] <= width:
                chosen.add(i)
                used += need[i]
        widths = [w or FLEX_MIN for _, w, _ in self.columns]
        for i in flex:  # the room the others leave, shared
            widths[i] = max(FLEX_MIN, FLEX_MIN + (width - used) // max(1, len(flex)))
        shown = sorted(chosen)
        if shown == self.shown and widths == self._widths:
            return False
        self.shown, self._widths = shown, widths
        follow = self.current_id()
        self.table.clear(columns=True)
        self._add_columns()
        for pos, cells in enumerate(self._cells):
            self.table.add_row(*(cells[i] for i in shown), key=f"r{pos}")
        if follow is not None and follow in self.ids:
            self.table.move_cursor(row=self.ids.index(follow), animate=False)
        return True

    def current_id(self) -> str | None:
        row = self.table.cursor_row
        return self.ids[row] if 0 <= row < len(self.ids) else None

    def sync(self, rows: Sequence[tuple[str, Sequence[Cell]]], follow: str | None = None) -> int:
        """Show `rows` (id, cells); keep the cursor on `follow` (default: the current row).

        Returns how many cells were written.
        """
        follow = follow if follow is not None else self.current_id()
        # every cell through the one sanitiser: host text never reaches the table as markup
        rows = [(rid, [inert(c) for c in cells]) for rid, cells in rows]
        t = self.table
        written = 0
        n_old, n_new = len(self._cells), len(rows)
        for pos in range(min(n_old, n_new)):
            old = self._cells[pos]
            new = rows[pos][1]
            for c in self.shown:
                if old[c] != new[c]:
                    t.update_cell(f"r{pos}", f"c{c}", new[c])
                    written += 1
            self._cells[pos] = list(new)
        for pos in range(n_old - 1, n_new - 1, -1):
            t.remove_row(f"r{pos}")
        del self._cells[n_new:]
        if n_new > n_old:
            for pos in range(n_old, n_new):
                t.add_row(*(rows[pos][1][i] for i in self.shown), key=f"r{pos}")
                self._cells.append(list(rows[pos][1]))
                written += len(self.shown)
        self.ids = [r[0] for r in rows]
        if follow is not None and follow in self.ids:
            want = self.ids.index(follow)
            if t.cursor_row != want:
                t.move_cursor(row=want, animate=False)
        return written

    def sync_row(self, pos: int, cells: Sequence[Cell]) -> int:
        """Rewrite one row in place (same id)."""
        cells = [inert(c) for c in cells]
        old = self._cells[pos]
        written = 0
        for c in self.shown:
            if old[c] != cells[c]:
                self.table.update_cell(f"r{pos}", f"c{c}", cells[c])
                written += 1
        self._cells[pos] = list(cells)
        return written

    def clear(self) -> None:
        self.table.clear()
        self.ids, self._cells = [], []

    def cell(self, row_id: str, col: int) -> Cell:
        """A row's cell by column, shown or not."""
        return self._cells[self.ids.index(row_id)][col]
