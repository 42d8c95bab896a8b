"""Modal screens: the key list and the quit confirmation."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

KEYS = """\
[b]Keys[/b]

  [b]1 2 3[/b]     run / GPUs / smoke tab
  [b]↑ ↓[/b]       move between hosts (the run view shows the selected host)
  [b]/[/b]         filter hosts (text or glob); enter keeps it, escape clears it
  [b]r[/b]         retry the failed and unreachable hosts
  [b]o[/b]         GPUs: the overview <-> one host's GPUs
  [b]enter[/b]     GPUs: open the host under the cursor
  [b]n p[/b]       GPUs: next / previous host
  [b]s S[/b]       GPUs: sort by the next column / reverse (or click a header)
  [b]?[/b]         this help
  [b]q[/b]         quit (asks first while a run is in progress)
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,enter", "dismiss", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="modal-box"):
            yield Static(KEYS, id="help-text")
            yield Static("[dim]escape closes[/dim]")


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
