"""The gpunode terminal app: `run` mode (Run, GPUs and Smoke tabs) and `top` mode (GPUs).

The app does no work. In run mode it reads events: `post_event` (thread-safe, a Bus
subscriber) queues them and a timer applies the queue to a `RunState` in one batch,
so a burst of output costs one redraw; the recap shown is the one `RunFinished`
carries. The GPUs tab reads a monitor `Board` on a timer of its own. `r` resets the
failed and unreachable hosts' rows and hands their names to `on_retry` (an apply
session's retry), whose events then arrive like the first run's. Quitting while a
run is in progress asks first and exits with ExitCode.INTERRUPTED.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, Literal

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane

from gpunode.events import Event, RunFinished, SmokeResult
from gpunode.exitcodes import ExitCode
from gpunode.monitor.board import Board
from gpunode.tui.gpu_view import GpuView
from gpunode.tui.run_view import RunView
from gpunode.tui.runstate import RunState
from gpunode.tui.screens import ConfirmQuit, HelpScreen
from gpunode.tui.smoke_view import SmokeView

RetryCallback = Callable[[list[str]], None]


class FilterInput(Input):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Clear filter")]

    def action_cancel(self) -> None:
        self.value = ""
        self.app.set_focus(None)
        self.display = False


class GpunodeApp(App[int]):
    CSS_PATH = Path(__file__).with_name("gpunode.tcss")
    TITLE = "gpunode"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_app", "Quit"),
        Binding("question_mark", "help", "Keys"),
        Binding("slash", "filter", "Filter"),
        Binding("r", "retry", "Retry failed"),
        Binding("1", "tab('run')", "Run", show=False),
        Binding("2", "tab('gpus')", "GPUs", show=False),
        Binding("3", "tab('smoke')", "Smoke", show=False),
    ]

    def __init__(
        self,
        *,
        mode: Literal["run", "top"] = "run",
        hosts: Sequence[str] = (),
        board: Board | None = None,
        on_retry: RetryCallback | None = None,
        clock: Callable[[], float] = time.time,
        title: str = "gpunode",
        gpu_interval: float = 0.5,
        event_interval: float = 0.1,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.mode = mode
        self.state = RunState(hosts, clock=clock)
        self.board = board
        self.on_retry = on_retry
        self.clock = clock
        self.title = title
        self.gpu_interval = gpu_interval
        self.event_interval = event_interval
        self._inbox: deque[Event] = deque()
        self._on_ready = on_ready
        self.events_applied = 0

    # -- feeding -------------------------------------------------------------------------

    def post_event(self, event: Event) -> None:
        """Thread-safe: queue an event for the next tick. Usable as a Bus subscriber."""
        self._inbox.append(event)

    # -- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        if self.mode == "top":
            yield GpuView(self.board, clock=self.clock, id="gpus")
        else:
            with TabbedContent(initial="run", id="tabs"):
                with TabPane("Run", id="run"):
                    yield RunView(self.state, clock=self.clock, id="run-view")
                with TabPane("GPUs", id="gpus-tab"):
                    yield GpuView(self.board, clock=self.clock, id="gpus")
                with TabPane("Smoke", id="smoke"):
                    yield SmokeView(self.state, id="smoke-view")
        yield FilterInput(
            placeholder="filter hosts: text or glob (enter keeps, escape clears)", id="filter"
        )
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter").display = False
        self.set_interval(self.event_interval, self.apply_events)
        if self.board is not None:
            self.set_interval(self.gpu_interval, self.refresh_gpus)
        if self.mode == "run":
            self.set_interval(1.0, self.query_one(RunView).tick)
            self.query_one("#run-table").focus()
        else:
            self.query_one("#gpu-table").focus()
        if self._on_ready is not None:
            self._on_ready()  # the caller starts its work now that events have a home

    # -- timers --------------------------------------------------------------------------

    def apply_events(self) -> None:
        if not self._inbox or self.mode != "run":
            self._inbox.clear() if self.mode != "run" else None
            return
        views = self.query(RunView)
        if not views:  # the screen is being torn down
            return
        changed: set[str] = set()
        run_wide = smoke = finished = False
        while self._inbox:
            e = self._inbox.popleft()
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

    def refresh_gpus(self) -> None:
        for view in self.query(GpuView):  # none once the screen is being torn down
            view.refresh_data()

    # -- actions -------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # `gpunode top` has no run: hide the run's keys.
        return not (self.mode == "top" and action in ("retry", "tab"))

    def action_tab(self, tab: str) -> None:
        if self.mode != "run":
            return
        tabs = self.query_one("#tabs", TabbedContent)
        tabs.active = "gpus-tab" if tab == "gpus" else tab
        self._focus_tab(tabs.active)

    def _focus_tab(self, pane: str) -> None:
        target = {"run": "#run-table", "gpus-tab": "#gpu-table", "smoke": "#smoke-table"}[pane]
        found = self.query(target)
        if found:
            found.first().focus()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id:
            self._focus_tab(event.pane.id)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_quit_app(self) -> None:
        if self.mode == "run" and self.state.running:

            def answered(yes: bool | None) -> None:
                if yes:
                    self.exit(ExitCode.INTERRUPTED)

            self.push_screen(ConfirmQuit(), answered)
            return
        code = self.state.exit_code
        self.exit(code if code is not None else 0)

    def action_filter(self) -> None:
        box = self.query_one("#filter", FilterInput)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "filter":
            return
        for view in self.query(RunView):
            view.set_filter(event.value)
        for gv in self.query(GpuView):
            gv.set_filter(event.value)
        for sv in self.query(SmokeView):
            sv.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.input.display = False
            if self.mode == "run":
                self._focus_tab(self.query_one("#tabs", TabbedContent).active)
            else:
                self.query_one("#gpu-table").focus()

    def action_retry(self) -> None:
        if self.mode != "run":
            return
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
