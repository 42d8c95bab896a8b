"""`?` lists every key of the screen it was pressed on: the screen's bindings, those of
the widgets on it and of the dialogs it may open, each with its help text."""

from __future__ import annotations

from typing import ClassVar

import pytest
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.pilot import Pilot

from gpunode.tui.app import GpunodeApp, Mode
from gpunode.tui.keyhelp import key_display
from gpunode.tui.run_screen import RunScreen
from gpunode.tui.screens import HelpScreen
from gpunode.tui.smoke_screen import SmokeScreen
from gpunode.tui.top_screen import TopScreen
from tests.tui import scenario as sc


def declared(cls: type) -> list[Binding]:
    """Every binding `cls` and its ancestors list in BINDINGS, Textual's own classes aside."""
    return [
        b
        for c in cls.__mro__
        if "BINDINGS" in vars(c) and not c.__module__.startswith("textual.")
        for b in Binding.make_bindings(vars(c)["BINDINGS"])
    ]


def screen_bindings(screen: DOMNode) -> list[Binding]:
    """The screen's, its widgets' and its dialogs' bindings."""
    nodes = [screen, *screen.walk_children(with_self=False)]
    modals = [cls for _, cls in getattr(screen, "HELP_MODALS", ())]
    return [b for cls in [*(type(n) for n in nodes), *modals, HelpScreen] for b in declared(cls)]


def assert_listed(pilot: Pilot[int], bindings: list[Binding]) -> None:
    app = pilot.app
    assert isinstance(app.screen, HelpScreen)
    lines = str(app.screen.query_one("#help-text").render()).splitlines()
    show = key_display(app.get_key_display)
    for b in bindings:
        what = b.tooltip or b.description
        hits = [ln for ln in lines if what in ln and show(b) in ln.split(what)[0].split()]
        assert hits, f"{b.key} ({what}) is not in the help:\n" + "\n".join(lines)


@pytest.mark.parametrize(
    ("mode", "screen"), [("run", RunScreen), ("smoke", SmokeScreen), ("top", TopScreen)]
)
async def test_help_lists_every_binding_of_each_screen(mode: Mode, screen: type) -> None:
    app = GpunodeApp(mode=mode, hosts=sc.HOSTS, board=sc.board(), clock=sc.clock)
    async with app.run_test(size=(150, 60)) as pilot:
        assert type(app.screen) is screen
        wanted = screen_bindings(app.screen)
        # the screen's own keys, the GPUs view's, the filter box's and the help's, at least
        keys = {b.key for b in wanted}
        assert {"q", "question_mark", "slash", "o", "s", "S", "n", "p", "escape"} <= keys
        if mode != "top":
            assert {"1", "2", "y"} <= keys  # tabs; the quit dialog's answers
        await pilot.press("question_mark")
        assert_listed(pilot, wanted)
        await pilot.press("escape")
        assert type(app.screen) is screen


async def test_a_key_added_to_a_screen_is_in_its_help_with_no_other_edit() -> None:
    class Busier(TopScreen):
        BINDINGS: ClassVar[list[BindingType]] = [
            Binding("x,ctrl+x", "bell", "Ring", tooltip="ring the terminal bell"),
        ]

    app = GpunodeApp(mode="top", board=sc.board(), clock=sc.clock)
    async with app.run_test(size=(150, 60)) as pilot:
        await app.push_screen(Busier(sc.board(), clock=sc.clock))
        await pilot.press("question_mark")
        assert_listed(pilot, list(Binding.make_bindings(Busier.BINDINGS)))
        text = str(app.screen.query_one("#help-text").render())
        assert "x ^x" in text and "ring the terminal bell" in text
