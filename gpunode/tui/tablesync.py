"""Write a list of rows into a DataTable touching only the cells that changed.

Rows are keyed by position, so re-sorting rewrites cells instead of rebuilding
the table, and the cursor follows the row it was on (by the caller's id).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from gpunode.tui.fmt import inert

Cell = Text | str


class TableSync:
    def __init__(self, table: DataTable[Any], columns: Sequence[tuple[str, int]]) -> None:
        self.table = table
        self.ids: list[str] = []
        self._cells: list[list[Cell]] = []
        self._ncols = len(columns)
        for i, (label, width) in enumerate(columns):
            table.add_column(label, width=width, key=f"c{i}")

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
            for c in range(self._ncols):
                if old[c] != new[c]:
                    t.update_cell(f"r{pos}", f"c{c}", new[c])
                    written += 1
            self._cells[pos] = list(new)
        for pos in range(n_old - 1, n_new - 1, -1):
            t.remove_row(f"r{pos}")
        del self._cells[n_new:]
        if n_new > n_old:
            for pos in range(n_old, n_new):
                t.add_row(*rows[pos][1], key=f"r{pos}")
                self._cells.append(list(rows[pos][1]))
                written += self._ncols
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
        for c in range(self._ncols):
            if old[c] != cells[c]:
                self.table.update_cell(f"r{pos}", f"c{c}", cells[c])
                written += 1
        self._cells[pos] = list(cells)
        return written

    def clear(self) -> None:
        self.table.clear()
        self.ids, self._cells = [], []
