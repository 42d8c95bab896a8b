"""The screen of `gpunode smoke`: each host's tests as they finish, and the GPUs they run
on, fed by the app's event inbox (live_screen.py applies it)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import TabbedContent, TabPane

from gpunode.tui.gpu_view import GpuView
from gpunode.tui.live_screen import Applied, LiveScreen
from gpunode.tui.smoke_view import SmokeView


class SmokeScreen(LiveScreen):
    TAB_TABLES: ClassVar[dict[str, str]] = {"smoke": "#smoke-table", "gpus-tab": "#gpu-table"}
    HELP_TITLE = "Keys (smoke)"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "tab('smoke')", "Smoke", show=False, tooltip="the smoke tab"),
        Binding("2", "tab('gpus')", "GPUs", show=False, tooltip="the GPUs tab"),
    ]

    def compose_body(self) -> ComposeResult:
        with TabbedContent(initial="smoke", id="tabs"):
            with TabPane("Smoke", id="smoke"):
                yield SmokeView(self.state, unreachable=True, id="smoke-view")
            with TabPane("GPUs", id="gpus-tab"):
                yield self.gpu_view()

    def views_ready(self) -> bool:
        return bool(self.query(SmokeView))

    def show(self, applied: Applied) -> None:
        if applied.smoke or applied.run_wide or applied.hosts:
            self.query_one(SmokeView).rebuild()
        if not applied.finished:
            self.sub_title = self.progress()

    def progress(self) -> str:
        """How far the run is: hosts finished of all, and those that failed or were lost."""
        hosts = list(self.state.hosts.values())
        done = [h for h in hosts if h.final]
        bad = [h for h in done if h.status != "ok"]
        text = f"smoke: {len(done)} of {len(hosts)} hosts done"
        return text + (f", {len(bad)} failed or unreachable" if bad else "")

    def set_filter(self, text: str) -> None:
        self.query_one(SmokeView).set_filter(text)
        self.query_one(GpuView).set_filter(text)
