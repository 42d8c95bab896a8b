"""The gpunode terminal app: one screen per mode, fed only by events and a monitor Board.

`run` (gpunode apply) starts on a RunScreen: run, GPUs and smoke tabs; `smoke` (gpunode
smoke) on a SmokeScreen: smoke and GPUs tabs; `top` (gpunode top) on a TopScreen: the GPU
view alone. The app holds what outlives a screen: the title, the event inbox that other
threads fill through `post_event`, and the caller's `on_ready`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from textual.app import App
from textual.screen import Screen

from gpunode.events import Event
from gpunode.monitor.board import Board
from gpunode.tui.live_screen import LiveScreen
from gpunode.tui.run_screen import RetryCallback, RunScreen
from gpunode.tui.runstate import RunState
from gpunode.tui.smoke_screen import SmokeScreen
from gpunode.tui.top_screen import TopScreen

Mode = Literal["run", "smoke", "top"]


class GpunodeApp(App[int]):
    CSS_PATH = Path(__file__).with_name("gpunode.tcss")
    TITLE = "gpunode"

    def __init__(
        self,
        *,
        mode: Mode = "run",
        hosts: Sequence[str] = (),
        board: Board | None = None,
        on_retry: RetryCallback | None = None,
        clock: Callable[[], float] = time.time,
        title: str = "gpunode",
        fleet: str = "",
        gpu_interval: float = 0.5,
        event_interval: float = 0.1,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.title = title
        self._inbox: deque[Event] = deque()
        self._on_ready = on_ready

        def live(screen: type[LiveScreen], **more: Any) -> Screen[None]:
            return screen(RunState(hosts, clock=clock), self._inbox, board, clock=clock,
                          gpu_interval=gpu_interval, event_interval=event_interval,
                          fleet=fleet, **more)  # fmt: skip

        screens: dict[Mode, Callable[[], Screen[None]]] = {
            "run": lambda: live(RunScreen, on_retry=on_retry),
            "smoke": lambda: live(SmokeScreen),
            "top": lambda: TopScreen(board, clock=clock, interval=gpu_interval, fleet=fleet),
        }
        self._first_screen = screens[mode]

    def post_event(self, event: Event) -> None:
        """Thread-safe: queue an event for the screen's next tick. Usable as a Bus subscriber."""
        self._inbox.append(event)

    async def action_quit(self) -> None:
        """Ctrl-Q: the screen's own quit, which asks first while a run goes on."""
        from gpunode.tui.screens import ConfirmQuit

        for screen in reversed(self.screen_stack):
            ask = getattr(screen, "action_quit_app", None)
            if callable(ask):
                if not isinstance(self.screen, ConfirmQuit):  # not twice
                    ask()
                return
        self.exit()

    def get_default_screen(self) -> Screen[None]:
        return self._first_screen()

    def on_mount(self) -> None:
        if self._on_ready is not None:
            self._on_ready()  # the caller starts its work now that events have a home
