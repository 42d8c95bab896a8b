"""A value that must never be printed: sudo passwords.

A password named by `become_password_env` is read from the environment once and then
removed from it (`os.environ`, hence the C environment too, and the bytes of the block the
process started with, which /proc/<pid>/environ shows), so that no process gpunode
starts afterwards (local commands, helpers) inherits it, and no one reads it there. `child_env` is
the environment for children, without any variable a password was taken from.
"""

from __future__ import annotations

import os
import threading
import unicodedata
from collections.abc import Iterable
from pathlib import Path

_taken: dict[str, Secret] = {}
_lock = threading.Lock()


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
        """The password in environment variable `name`, or None if unset or empty.

        The first read takes the variable out of the environment; later reads get the
        same password back (or a new one, if the variable was set again meanwhile)."""
        if not name:
            return None
        with _lock:
            value = os.environ.pop(name, None)
            if value is not None:
                _scrub_start_environ(name)
                if value:
                    _taken[name] = cls(value)
                else:
                    _taken.pop(name, None)
            return _taken.get(name)


def _scrub_start_environ(name: str) -> None:
    """Overwrite `name=value` in the environment block this process was started with:
    /proc/<pid>/environ shows that block, which unsetenv leaves as it was (Linux only; where
    it cannot be read or written, nothing happens)."""
    try:
        fields = Path("/proc/self/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = mem.read(end - start)
            key = name.encode() + b"="
            at = 0
            while (at := block.find(key, at)) != -1:
                if at == 0 or block[at - 1] == 0:
                    stop = block.find(b"\0", at)
                    stop = len(block) if stop == -1 else stop
                    mem.seek(start + at)
                    mem.write(b"\0" * (stop - at))
                at += len(key)
    except (OSError, ValueError, IndexError):
        return


def unusable(value: str) -> str | None:
    """Why sudo cannot be given this password, or None: sudo reads one line, and on a
    terminal its line editing acts on control characters (^U, ^D, DEL...)."""
    if "\n" in value or "\r" in value:
        return "a line break"
    if any(unicodedata.category(c) == "Cc" for c in value):
        return "a control character"
    return None


def take_from_env(names: Iterable[str | None]) -> None:
    """Read (and so remove) each named password now, before any child process starts."""
    for name in names:
        Secret.from_env(name)


def child_env() -> dict[str, str]:
    """The environment for a child process: this one without the password variables."""
    with _lock:
        return {k: v for k, v in os.environ.items() if k not in _taken}
