"""A view whose main table shows the columns that fit its width, by priority (TableSync.fit:
the host and its state always), through every resize."""

from __future__ import annotations

from textual import events
from textual.containers import Vertical

from gpunode.tui.tablesync import SCROLLBAR, TableSync


class TableView(Vertical):
    """Set `_sync` at mount, then call `fit_columns()`."""

    _sync: TableSync

    def fit_columns(self) -> None:
        # Before the first layout this view's own width is 0; the app's is known (a later
        # Resize refits). A Resize may also be handled before mount (and skipped): fit again
        # once laid out, or the table keeps only its pinned columns.
        self._sync.fit((self.size.width or self.app.size.width) - SCROLLBAR)
        self.call_after_refresh(self._refit)

    def on_resize(self, event: events.Resize) -> None:
        if hasattr(self, "_sync"):
            self._sync.fit(event.size.width - SCROLLBAR)

    def _refit(self) -> None:
        if hasattr(self, "_sync") and self.size.width > 0:
            self._sync.fit(self.size.width - SCROLLBAR)
