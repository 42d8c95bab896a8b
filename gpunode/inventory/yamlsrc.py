"""Strict YAML loading that remembers where every key and value came from.

YAML 1.2 rules (ruamel): `yes`/`no`/`on`/`off` stay strings, duplicate keys are
errors. The result is plain Python data plus a position map, so that later
validation errors can name `file:line:column`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Position:
    file: str
    line: int  # 1-based
    column: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass
class Source:
    """Plain data loaded from YAML, with the position of every node."""

    file: str
    data: Any
    positions: dict[Path_, Position] = field(default_factory=dict)
    text: str = ""

    def token_at(self, pos: Position) -> str:
        """The plain scalar written at `pos`, as typed (12.10 stays "12.10")."""
        lines = self.text.splitlines()
        if not 0 < pos.line <= len(lines):
            return ""
        rest = lines[pos.line - 1][pos.column - 1 :]
        return re.split(r"[\s,\]}#]", rest, maxsplit=1)[0]

    def position(self, path: Path_) -> Position:
        """Position of the deepest node along `path` that exists in the file."""
        for end in range(len(path), -1, -1):
            pos = self.positions.get(tuple(path[:end]))
            if pos is not None:
                return pos
        return Position(self.file, 1, 1)


class YamlError(Exception):
    def __init__(self, position: Position, message: str) -> None:
        super().__init__(f"{position}: {message}")
        self.position = position
        self.message = message


def load_text(text: str, file: str) -> Source:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError

    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = False
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        dup = re.search(r'duplicate key "([^"]*)"', problem)
        if dup:
            first = exc.context_mark.line + 1 if exc.context_mark else "?"
            problem = (
                f"duplicate key {dup.group(1)!r} (this mapping starts at line {first}): "
                "a key may appear once per mapping; remove or merge the repeat"
            )
        raise YamlError(Position(file, line, col), problem.replace("\n", " ")) from None
    src = Source(file=file, data=None, text=text)
    src.positions[()] = Position(file, 1, 1)
    src.data = _plain(doc, (), src)
    return src


def load_file(path: str | Path) -> Source:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise YamlError(Position(str(path), 1, 1), "no such file") from None
    except UnicodeDecodeError as exc:
        raise YamlError(Position(str(path), 1, 1), f"not UTF-8 text ({exc.reason})") from None
    return load_text(text, str(path))


def _plain(node: Any, path: Path_, src: Source) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import ScalarString

    if isinstance(node, CommentedMap):
        out: dict[Any, Any] = {}
        for key, value in node.items():
            k = str(key) if isinstance(key, ScalarString) else key
            line, col = node.lc.key(key)
            here: Path_ = (*path, k)
            src.positions[here] = Position(src.file, line + 1, col + 1)
            vline, vcol = node.lc.value(key)
            value_at: Path_ = (*here, "<value>")
            src.positions[value_at] = Position(src.file, vline + 1, vcol + 1)
            out[k] = _plain(value, here, src)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, value in enumerate(node):
            line, col = node.lc.item(i)
            item: Path_ = (*path, i)
            src.positions[item] = Position(src.file, line + 1, col + 1)
            items.append(_plain(value, item, src))
        return items
    if isinstance(node, ScalarString):
        return str(node)
    if type(node).__module__.startswith("ruamel"):
        # ScalarFloat, ScalarInt, ScalarBoolean: keep the plain Python value.
        if type(node).__name__ == "ScalarBoolean":
            return bool(node)
        for plain in (int, float):
            if isinstance(node, plain):
                return plain(node)
    return node
