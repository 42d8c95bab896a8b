"""Turn validation errors into messages a lab admin can act on."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpunode.inventory.text import printable
from gpunode.inventory.yamlpos import Position


@dataclass(frozen=True)
class Problem:
    position: Position
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.field}: " if self.field else ""
        return f"{self.position}: {where}{self.message}"


class InventoryError(Exception):
    """One or more problems in an inventory; all are reported together."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def field_path(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue  # pydantic's marker for "the key itself": the message says so
        else:
            text = printable(str(part))  # keys are inventory text too
            out += f".{text}" if out else text
    return out


def _is_version_field(loc: Sequence[str | int]) -> bool:
    names = [p for p in loc if isinstance(p, str)]
    return bool(names) and (
        names[-1]
        in {"branch", "default", "toolkits", "cudnn", "nccl", "python", "pytorch", "tensorflow"}
    )


def explain(error: dict[str, Any], known_keys: Sequence[str] = (), written: str = "") -> str:
    """A message that says what is wrong and what to write instead."""
    kind = error["type"]
    value = error.get("input")
    loc = error["loc"]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    # cudnn, nccl: a mapping or a version alone (inventory.model.Package)
    if number and (kind == "string_type" or (kind == "model_type" and _is_version_field(loc))):
        if _is_version_field(loc):
            text = written or str(value)
            read_as = f" (YAML reads {text} as the number {value!r})" if text != str(value) else ""
            return f'versions must be quoted strings: write "{text}"{read_as}'
        return f"expected text, got the number {value!r}: put it in quotes"
    if kind == "string_pattern_mismatch" and _is_version_field(loc):
        return f'{value!r} is not a version: use digits and dots in quotes, e.g. "12.4"'
    if kind == "string_pattern_mismatch":
        from gpunode.inventory.model import PATTERN_HINTS

        hint = PATTERN_HINTS.get(str(error.get("ctx", {}).get("pattern")))
        if hint:
            return f"{value!r} is not {hint}"
    if kind == "bool_type":
        if isinstance(value, str) and value.lower() in {"yes", "no", "on", "off", "y", "n"}:
            return f"{value!r} is not a boolean here: write true or false"
        return f"expected true or false, got {value!r}"
    if kind == "extra_forbidden":
        key = str(loc[-1])
        close = difflib.get_close_matches(key, known_keys, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(known_keys)}"
        return f"unknown key {key!r}: {hint}"
    if kind == "missing":
        return "required but missing: add it"
    if kind in {"int_type", "float_type"} and isinstance(value, str):
        return f"expected a number, got the text {value!r}: remove the quotes"
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    return str(error["msg"])
