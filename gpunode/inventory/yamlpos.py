"""Where a YAML value came from: positions, the loaded source, and errors that name them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
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
