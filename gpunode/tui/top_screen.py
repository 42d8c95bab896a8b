"""The screen of `gpunode top`: the GPU view alone, live from every host's Board entry."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.app import ComposeResult

from gpunode.monitor.board import Board
from gpunode.tui.gpu_view import GpuView
from gpunode.tui.hosts_screen import HostsScreen


class TopScreen(HostsScreen):
    """No run here: only the shared keys (`q` `?` `/`) and the GPU view's own."""

    HELP_TITLE = "Keys (top)"

    def __init__(
        self,
        board: Board | None,
        *,
        clock: Callable[[], float] = time.time,
        interval: float = 0.5,
        fleet: str = "",
    ) -> None:
        super().__init__()
        self.board = board
        self.fleet = fleet
        self.clock = clock
        self.interval = interval

    def compose_body(self) -> ComposeResult:
        yield GpuView(
            self.board, clock=self.clock, interval=self.interval, fleet=self.fleet, id="gpus"
        )

    def focus_body(self) -> None:
        found = self.query("#gpu-table")
        if found:
            found.first().focus()

    def set_filter(self, text: str) -> None:
        self.query_one(GpuView).set_filter(text)
