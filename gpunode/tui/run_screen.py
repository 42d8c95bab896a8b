"""The screen of `gpunode apply`: run, GPUs and smoke tabs, fed by the app's event inbox.

The caller's threads append events to the inbox; this screen applies them in batches on
its own timer, so a burst of output or samples costs one redraw, not one per event.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import TabbedContent, TabPane

from gpunode.events import Event, RunFinished, SmokeResult
from gpunode.exitcodes import ExitCode
from gpunode.monitor.board import Board
from gpunode.tui.gpu_view import GpuView
from gpunode.tui.hosts_screen import HostsScreen
from gpunode.tui.run_view import RunView
from gpunode.tui.runstate import RunState
from gpunode.tui.screens import ConfirmQuit
from gpunode.tui.smoke_view import SmokeView

RetryCallback = Callable[[list[str]], None]
# each tab's pane id -> the table that takes the focus there
TAB_TABLES = {"run": "#run-table", "gpus-tab": "#gpu-table", "smoke": "#smoke-table"}


class RunScreen(HostsScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "retry", "Retry failed"),
        Binding("1", "tab('run')", "Run", show=False),
        Binding("2", "tab('gpus')", "GPUs", show=False),
        Binding("3", "tab('smoke')", "Smoke", show=False),
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
        super().__init__()
        self.fleet = fleet
        self.state = state
        self.inbox = inbox
        self.board = board
        self.on_retry = on_retry
        self.clock = clock
        self.gpu_interval = gpu_interval
        self.event_interval = event_interval
        self.events_applied = 0

    def compose_body(self) -> ComposeResult:
        with TabbedContent(initial="run", id="tabs"):
            with TabPane("Run", id="run"):
                yield RunView(self.state, clock=self.clock, id="run-view")
            with TabPane("GPUs", id="gpus-tab"):
                yield GpuView(
                    self.board,
                    clock=self.clock,
                    interval=self.gpu_interval,
                    fleet=self.fleet,
                    id="gpus",
                )
            with TabPane("Smoke", id="smoke"):
                yield SmokeView(self.state, id="smoke-view")

    def on_mount(self) -> None:
        # HostsScreen.on_mount runs too (Textual calls each class's handler).
        self.set_interval(self.event_interval, self.apply_events)

    def apply_events(self) -> None:
        """Apply what arrived since the last tick, then redraw what it touched, once."""
        views = self.query(RunView)
        if not self.inbox or not views:  # no views: the screen is being torn down
            return
        changed: set[str] = set()
        run_wide = smoke = finished = False
        while self.inbox:
            e = self.inbox.popleft()
            self.events_applied += 1
            host = self.state.apply(e)
            if host == "":
                run_wide = True
            elif host:
                changed.add(host)
            smoke = smoke or isinstance(e, SmokeResult)
            finished = finished or isinstance(e, RunFinished)
        run = views.first()
        if run_wide:
            run.rebuild()
        run.update_hosts(changed)
        run.sync_output()
        if smoke:
            for sv in self.query(SmokeView):
                sv.rebuild()
        if run_wide or finished:
            run.show_recap()
            if finished:
                self.sub_title = f"finished, exit {self.state.exit_code}"
            elif self.state.running:
                self.sub_title = self.state.command

    # -- HostsScreen ---------------------------------------------------------------------

    def focus_body(self) -> None:
        self._focus_tab(self.query_one("#tabs", TabbedContent).active)

    def _focus_tab(self, pane: str) -> None:
        found = self.query(TAB_TABLES[pane])
        if found:
            found.first().focus()

    def set_filter(self, text: str) -> None:
        self.query_one(RunView).set_filter(text)
        self.query_one(GpuView).set_filter(text)
        self.query_one(SmokeView).set_filter(text)

    # -- keys ----------------------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        tabs = self.query_one("#tabs", TabbedContent)
        tabs.active = "gpus-tab" if tab == "gpus" else tab
        self.focus_body()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id:
            self._focus_tab(event.pane.id)

    def action_quit_app(self) -> None:
        if self.state.running:

            def answered(yes: bool | None) -> None:
                if yes:
                    self.app.exit(ExitCode.INTERRUPTED)

            self.app.push_screen(ConfirmQuit(), answered)
            return
        code = self.state.exit_code
        self.app.exit(code if code is not None else 0)

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
