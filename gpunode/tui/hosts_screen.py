"""What every full screen of the app shares: header, host filter, footer and the common keys.

A subclass composes its own body and says which of its views the filter narrows and
which table takes the focus back once the filter is closed.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Header, Input

from gpunode.tui.keyhelp import key_display, screen_help
from gpunode.tui.screens import HelpScreen


class FilterInput(Input):
    HELP_TITLE = "Filter box"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Clear filter", tooltip="clear the filter and close the box")
    ]
    HELP_NOTES = (("enter", "keep the filter and close the box"),)

    def action_cancel(self) -> None:
        self.value = ""
        self.app.set_focus(None)
        self.display = False


class HostsScreen(Screen[None]):
    """Header, body, filter box and footer; `q`, `?` and `/`. Subclasses add their keys."""

    HELP_TITLE = "Keys"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_app", "Quit", tooltip="quit (asks first while a run is in progress)"),
        Binding("question_mark", "help", "Keys", tooltip="this list of keys"),
        Binding("slash", "filter", "Filter", tooltip="filter hosts (text or glob)"),
    ]
    HELP_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("↑ ↓ pgup pgdn", "move in the table"),
        ("^q", "quit, as q"),  # Textual binds it (App.BINDINGS); GpunodeApp.action_quit
    )

    def compose(self) -> ComposeResult:
        yield Header()
        yield from self.compose_body()
        yield FilterInput(
            placeholder="filter hosts: text or glob (enter keeps, escape clears)", id="filter"
        )
        yield Footer()

    def compose_body(self) -> ComposeResult:
        raise NotImplementedError

    def on_mount(self) -> None:
        self.query_one("#filter").display = False
        self.focus_body()

    def focus_body(self) -> None:
        """Give the focus to the table the user is looking at."""
        raise NotImplementedError

    def set_filter(self, text: str) -> None:
        """Narrow every view of this screen to the hosts matching `text`."""
        raise NotImplementedError

    # -- keys ----------------------------------------------------------------------------

    def action_quit_app(self) -> None:
        self.app.exit(0)

    def action_help(self) -> None:
        display = key_display(self.app.get_key_display)
        self.app.push_screen(HelpScreen(screen_help(self, display)))

    def action_filter(self) -> None:
        box = self.query_one("#filter", FilterInput)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.input.display = False
            self.focus_body()
