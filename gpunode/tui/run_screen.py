"""The screen of `gpunode apply`: run, GPUs and smoke tabs, fed by the app's event inbox
(live_screen.py applies it)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import TabbedContent, TabPane

from gpunode.events import Event
from gpunode.monitor.board import Board
from gpunode.tui.gpu_view import GpuView
from gpunode.tui.live_screen import Applied, LiveScreen
from gpunode.tui.run_view import RunView
from gpunode.tui.runstate import RunState
from gpunode.tui.smoke_view import SmokeView

RetryCallback = Callable[[list[str]], None]


class RunScreen(LiveScreen):
    # each tab's pane id -> the table that takes the focus there
    TAB_TABLES: ClassVar[dict[str, str]] = {
        "run": "#run-table",
        "gpus-tab": "#gpu-table",
        "smoke": "#smoke-table",
    }
    HELP_TITLE = "Keys (apply)"
    QUIT_DETAIL = (
        "The run stops as on Ctrl-C: no new change or host starts, each host's running "
        "command finishes (Ctrl-C then cuts it), and the run is recorded as interrupted."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "retry", "Retry failed", tooltip="retry the failed and unreachable hosts"),
        Binding("1", "tab('run')", "Run", show=False, tooltip="the run tab"),
        Binding("2", "tab('gpus')", "GPUs", show=False, tooltip="the GPUs tab"),
        Binding("3", "tab('smoke')", "Smoke", show=False, tooltip="the smoke tab"),
    ]

    def __init__(
        self,
        state: RunState,
        inbox: deque[Event],
        board: Board | None = None,
        *,
        on_retry: RetryCallback | None = None,
        clock: Callable[[], float] = time.time,
        gpu_interval: float = 0.5,
        event_interval: float = 0.1,
        fleet: str = "",
    ) -> None:
        super().__init__(state, inbox, board, clock=clock, gpu_interval=gpu_interval,
                         event_interval=event_interval, fleet=fleet)  # fmt: skip
        self.on_retry = on_retry

    def compose_body(self) -> ComposeResult:
        with TabbedContent(initial="run", id="tabs"):
            with TabPane("Run", id="run"):
                yield RunView(self.state, clock=self.clock, id="run-view")
            with TabPane("GPUs", id="gpus-tab"):
                yield self.gpu_view()
            with TabPane("Smoke", id="smoke"):
                yield SmokeView(self.state, id="smoke-view")

    def views_ready(self) -> bool:
        return bool(self.query(RunView))

    def show(self, applied: Applied) -> None:
        run = self.query_one(RunView)
        if applied.run_wide:
            run.rebuild()
        run.update_hosts(applied.hosts)
        run.sync_output()
        if applied.smoke:
            for sv in self.query(SmokeView):
                sv.rebuild()
        if applied.run_wide or applied.finished:
            run.show_recap()
            if not applied.finished and self.state.running:
                self.sub_title = self.state.command

    def set_filter(self, text: str) -> None:
        self.query_one(RunView).set_filter(text)
        self.query_one(GpuView).set_filter(text)
        self.query_one(SmokeView).set_filter(text)

    # -- keys ----------------------------------------------------------------------------

    def action_retry(self) -> None:
        hosts = self.state.retryable()
        if not hosts:
            self.notify("No failed or unreachable hosts to retry.")
            return
        if self.on_retry is None:
            self.notify("Retry is not available for this run.", severity="warning")
            return
        self.state.retry(hosts)
        view = self.query_one(RunView)
        view.rebuild()
        view.update_hosts(set(hosts))
        view.show_recap()
        self.notify(f"Retrying {len(hosts)} host{'s' if len(hosts) != 1 else ''}.")
        self.on_retry(hosts)
