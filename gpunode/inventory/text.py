"""Inventory text that reaches shells, files and terminals: refuse control characters,
and escape anything unprintable before it is shown."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

from gpunode.safetext import printable

__all__ = ["bad_char", "bad_strings", "printable"]  # printable: the one sanitiser, re-exported

# Cc: C0/C1 controls (ESC, NUL, newline...); Cf: invisible formatting (bidi overrides,
# zero-width joiners) that makes text read differently than it runs; Zl/Zp: line breaks.
_REFUSED = {"Cc", "Cf", "Zl", "Zp", "Cs"}
_NAMES = {0: "NUL", 9: "TAB", 10: "LINE FEED", 13: "CARRIAGE RETURN", 27: "ESC", 127: "DEL"}


def bad_char(text: str) -> str | None:
    """What is wrong with `text`, or None: names the first refused character."""
    for i, ch in enumerate(text):
        if unicodedata.category(ch) in _REFUSED:
            name = _NAMES.get(ord(ch)) or unicodedata.name(ch, "a control character")
            return (
                f"contains U+{ord(ch):04X} ({name}) at offset {i}: write plain text "
                "(this value reaches shells, files and terminals)"
            )
    return None


def bad_strings(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[Any, bool, str]]:
    """(path, is_key, problem) for every str in `data`, keys included, that bad_char refuses."""
    if isinstance(data, str):
        found = bad_char(data)
        if found:
            yield path, False, found
    elif isinstance(data, dict):
        for key, value in data.items():
            found = bad_char(key) if isinstance(key, str) else None
            if found:
                yield (*path, key), True, found
            yield from bad_strings(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from bad_strings(value, (*path, i))
