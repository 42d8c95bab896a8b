"""The one sanitiser before a terminal: text from hosts and inventories, made inert.

A host's output, a process or GPU name, a kernel log line can carry escape sequences
(colours, cursor moves, OSC 8 hyperlinks, window titles), C1 controls and bidi overrides
(U+202E) that make a terminal do or show something else than the text. Every view,
the TUI and the CLI's plain output pass such text through `printable` before it is shown;
`--json` output needs nothing (JSON escapes every control character).
"""

from __future__ import annotations

from typing import Final

_KEPT: Final = frozenset("\n\t")


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with every unprintable character shown escaped (ESC as \\x1b, U+202E as
    \\u202e, a carriage return as \\r): an escape sequence reaches the terminal as its
    visible characters, never as a control. `lines` keeps newlines and tabs (a block of
    text); without it the result is one line."""
    if text.isprintable():
        return text
    return "".join(
        ch
        if ch.isprintable() or (lines and ch in _KEPT)
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )
