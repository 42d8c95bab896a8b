"""The transport interface: how gpunode talks to a host.

Small on purpose (as httpx's transports): run a command, put a file, get a
file, close. Commands are argv lists or already-quoted shell text; anything
that came from an inventory must pass through `shlex.quote` (see `quote`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

OutputCallback = Callable[[Literal["stdout", "stderr"], str], None]


class TransportError(Exception):
    """The host could not be reached or the connection broke."""


class HostUnreachableError(TransportError):
    pass


class HostKeyError(HostUnreachableError):
    """The host's key is unknown (strict), changed or revoked: the host is refused."""


class HostKeyChangedError(HostKeyError):
    """The host offered a key other than the one known for it: someone may be in between.

    Its own host status ("hostkey-changed") and exit code (5), unlike an unknown key."""


class HostKeyRevokedError(HostKeyChangedError):
    """The host offered a key that a `@revoked` line lists."""


class CommandTimeoutError(TransportError):
    pass


class BecomeError(TransportError):
    """sudo refused: wrong password, or a password is needed and none was given."""


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def quote(value: str) -> str:
    return shlex.quote(value)


def join(argv: Sequence[str]) -> str:
    return shlex.join(argv)


class Transport(Protocol):
    name: str

    def connect(self) -> None:
        """Open the connection (idempotent). Raises HostUnreachableError."""

    def run(
        self,
        command: str | Sequence[str],
        *,
        sudo: bool = False,
        stdin: bytes | None = None,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        env: dict[str, str] | None = None,
    ) -> CommandResult:
        """Run through `sh -c` on the host; an argv list is quoted first."""
        ...

    def put(self, data: bytes, path: str, *, mode: int = 0o644, sudo: bool = False) -> None: ...

    def get(self, path: str, *, sudo: bool = False) -> bytes: ...

    def close(self) -> None: ...
