"""The key list `?` shows, made from the bindings themselves: the screen's, those of the
widgets on it and of the dialogs it may open. A key added to a BINDINGS list is listed
with no other edit; its help text is the binding's tooltip, else its description.

Textual's own classes are not read: their built-in keys (tab, a table's cursor keys) are
not ours to describe; a class names those it relies on in `HELP_NOTES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from textual.binding import Binding
from textual.dom import DOMNode

# Textual writes these as symbols ("⏎"); words read better in a list
KEY_NAMES = {"enter": "enter", "escape": "escape"}


@dataclass(frozen=True)
class Section:
    title: str
    rows: tuple[tuple[str, str], ...]
    """(keys, what they do)"""


def own_bindings(cls: type) -> list[Binding]:
    """The bindings `cls` and its ancestors but Textual's declare; a subclass's wins a key."""
    keys: dict[str, Binding] = {}
    for c in reversed(cls.__mro__):
        if not c.__module__.startswith("textual.") and "BINDINGS" in vars(c):
            for b in Binding.make_bindings(vars(c)["BINDINGS"]):
                keys[b.key] = b
    return list(keys.values())


def section(title: str, cls: type, display: Callable[[Binding], str]) -> Section | None:
    """`cls`'s keys, one row per action (its keys together), then its notes."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for b in own_bindings(cls):
        grouped.setdefault((b.action, b.tooltip or b.description), []).append(display(b))
    rows = [(" ".join(keys), what) for (_, what), keys in grouped.items()]
    rows += getattr(cls, "HELP_NOTES", ())
    return Section(title, tuple(rows)) if rows else None


def screen_help(screen: DOMNode, display: Callable[[Binding], str]) -> list[Section]:
    """Every key `screen` answers to: its own, its widgets' (each class once), and those of
    the dialogs it names in `HELP_MODALS` ((title, screen class) pairs)."""
    found: list[Section | None] = [section(getattr(screen, "HELP_TITLE", "Keys"), type(screen),
                                           display)]  # fmt: skip
    seen: set[type] = set()
    for node in screen.walk_children(with_self=False):
        cls = type(node)
        if cls not in seen:
            seen.add(cls)
            found.append(section(getattr(cls, "HELP_TITLE", cls.__name__), cls, display))
    modals: Iterable[tuple[str, type]] = getattr(screen, "HELP_MODALS", ())
    found += [section(title, cls, display) for title, cls in modals]
    return [s for s in found if s is not None]


def key_display(display: Callable[[Binding], str]) -> Callable[[Binding], str]:
    """The app's own key names (`?`, `/`, `^q`), with words for enter and escape."""
    return lambda b: b.key_display or KEY_NAMES.get(b.key) or display(b)
