"""What the screens of a run share (apply's RunScreen, smoke's SmokeScreen): the event
inbox applied in batches on the screen's own timer, tabs with a table each, and a quit
that asks while the run is still going.

The caller's threads append events to the inbox; the screen applies them on its timer, so
a burst of output or samples costs one redraw, not one per event.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from textual.widgets import TabbedContent

from gpunode.events import Event, RunFinished, RunInterrupted, SmokeResult
from gpunode.exitcodes import ExitCode
from gpunode.monitor.board import Board
from gpunode.tui.gpu_view import GpuView
from gpunode.tui.hosts_screen import HostsScreen
from gpunode.tui.runstate import RunState
from gpunode.tui.screens import QUIT_DETAIL, ConfirmQuit


@dataclass
class Applied:
    """What one batch of events touched."""

    hosts: set[str] = field(default_factory=set)
    run_wide: bool = False
    smoke: bool = False
    finished: bool = False


class LiveScreen(HostsScreen):
    """A run's screen: `state` fed from `inbox`, a GPUs tab reading `board`; `TAB_TABLES`
    names each tab's table."""

    TAB_TABLES: ClassVar[dict[str, str]] = {}
    QUIT_DETAIL: ClassVar[str] = QUIT_DETAIL
    """What quitting mid-run does to the run, as the quit dialog says it."""
    HELP_MODALS: ClassVar[tuple[tuple[str, type], ...]] = (("When asked to quit", ConfirmQuit),)
    """The dialogs this screen may open, for `?`'s key list."""

    def __init__(
        self,
        state: RunState,
        inbox: deque[Event],
        board: Board | None = None,
        *,
        clock: Callable[[], float] = time.time,
        gpu_interval: float = 0.5,
        event_interval: float = 0.1,
        fleet: str = "",
    ) -> None:
        super().__init__()
        self.state = state
        self.inbox = inbox
        self.board = board
        self.clock = clock
        self.gpu_interval = gpu_interval
        self.event_interval = event_interval
        self.fleet = fleet
        self.events_applied = 0
        self.stopping = False
        """The run was stopped from outside (SIGINT, SIGTERM): the screen closes at its end."""

    def gpu_view(self) -> GpuView:
        """The GPUs tab's view, as `gpunode top` shows it."""
        return GpuView(
            self.board, clock=self.clock, interval=self.gpu_interval, fleet=self.fleet, id="gpus"
        )

    def on_mount(self) -> None:
        # HostsScreen.on_mount runs too (Textual calls each class's handler).
        self.set_interval(self.event_interval, self.apply_events)

    def apply_events(self) -> None:
        """Apply what arrived since the last tick, then redraw what it touched, once."""
        if not self.inbox or not self.views_ready():
            return
        applied = Applied()
        while self.inbox:
            e = self.inbox.popleft()
            self.events_applied += 1
            host = self.state.apply(e)
            if host == "":
                applied.run_wide = True
            elif host:
                applied.hosts.add(host)
            applied.smoke = applied.smoke or isinstance(e, SmokeResult)
            applied.finished = applied.finished or isinstance(e, RunFinished)
            if isinstance(e, RunInterrupted):
                self.stopping = True
                self.sub_title = "stopping: the running commands finish, nothing new starts"
        self.show(applied)
        if applied.finished:
            self.sub_title = f"finished, exit {self.state.exit_code}"
            if self.stopping:  # a signal stopped the run: the process ends with it
                self.app.exit(self.state.exit_code or ExitCode.INTERRUPTED)

    def views_ready(self) -> bool:
        """False while the screen is being torn down (its views are gone)."""
        raise NotImplementedError

    def show(self, applied: Applied) -> None:
        """Redraw what a batch of events touched."""
        raise NotImplementedError

    # -- tabs ----------------------------------------------------------------------------

    def focus_body(self) -> None:
        self.focus_tab(self.query_one("#tabs", TabbedContent).active)

    def focus_tab(self, pane: str) -> None:
        found = self.query(self.TAB_TABLES[pane])
        if found:
            found.first().focus()

    def action_tab(self, tab: str) -> None:
        tabs = self.query_one("#tabs", TabbedContent)
        tabs.active = "gpus-tab" if tab == "gpus" else tab
        self.focus_body()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id:
            self.focus_tab(event.pane.id)

    # -- keys ----------------------------------------------------------------------------

    def action_quit_app(self) -> None:
        if self.state.running:

            def answered(yes: bool | None) -> None:
                if yes:
                    self.app.exit(ExitCode.INTERRUPTED)

            self.app.push_screen(ConfirmQuit(self.QUIT_DETAIL), answered)
            return
        code = self.state.exit_code
        self.app.exit(code if code is not None else 0)
