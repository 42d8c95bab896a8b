"""Modal screens: the key list and the quit confirmation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from gpunode.tui.keyhelp import Section, key_display, section


class HelpScreen(ModalScreen[None]):
    """The keys of the screen under it (keyhelp.py makes the list from their bindings),
    and its own."""

    HELP_TITLE = "This list"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,enter", "dismiss", "Close", tooltip="close this list"),
    ]

    def __init__(self, sections: Sequence[Section] = ()) -> None:
        super().__init__()
        self.sections = list(sections)

    def compose(self) -> ComposeResult:
        display = key_display(self.app.get_key_display)
        own = section(self.HELP_TITLE, type(self), display)
        with VerticalScroll(id="help-box", classes="modal-box"):
            yield Static(help_text([*self.sections, *([own] if own else [])]), id="help-text")


def help_text(sections: Sequence[Section]) -> Text:
    """Built as Text, never markup: keys like `[` would be taken for tags."""
    width = max((len(k) for s in sections for k, _ in s.rows), default=0)
    out = Text()
    for i, s in enumerate(sections):
        if i:
            out.append("\n\n")
        out.append(s.title, "bold")
        for keys, what in s.rows:
            out.append("\n  ").append(keys.ljust(width), "bold").append(f"  {what}")
    return out


QUIT_DETAIL = "The hosts' current commands are left to the run to stop."


class ConfirmQuit(ModalScreen[bool]):
    """Quit while a run goes on? `detail` says what quitting does to the run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, detail: str = QUIT_DETAIL) -> None:
        super().__init__()
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-box", classes="modal-box"):
            yield Static(
                Text.assemble("A run is in progress. Quit anyway?\n", (self.detail, "dim")),
                id="quit-text",
            )
            with Horizontal(id="quit-buttons"):
                yield Button("Quit (y)", variant="error", id="quit-yes")
                yield Button("Stay (n)", variant="primary", id="quit-no")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "quit-yes")
