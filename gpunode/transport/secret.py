"""A value that must never be printed: sudo passwords."""

from __future__ import annotations

import os


class Secret:
    """Holds a password; repr/str show '***' so it cannot leak through logs or tracebacks."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret cannot be pickled")

    @classmethod
    def from_env(cls, name: str | None) -> Secret | None:
        """The password in environment variable `name`, or None if unset or empty."""
        if not name:
            return None
        value = os.environ.get(name)
        return cls(value) if value else None
