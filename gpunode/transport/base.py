"""The transport interface: how gpunode talks to a host.

Small on purpose (as httpx's transports): run a command, get a file, forward a port of
the host's loopback, close. Commands are argv lists or already-quoted shell text;
anything that came from an inventory must pass through `shlex.quote` (see `quote`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

OutputCallback = Callable[[Literal["stdout", "stderr"], str], None]
Direction = Literal["to-host", "from-host"]
"""A forward's direction: the controller listens and the host is reached ("to-host", as
`ssh -L`), or the host listens and the controller is reached ("from-host", as `ssh -R`)."""


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


class OutputCutError(TransportError):
    """A command printed more than the transport keeps, and its caller needs all of it."""


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    stdout_cut: int = 0
    """Bytes dropped from the start of stdout: only its end is kept (transport/ring.py)."""
    stderr_cut: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def whole_stdout(self) -> str:
        """stdout for a parser that needs all of it: a cut one is refused, never parsed."""
        if self.stdout_cut:
            raise OutputCutError(
                f"{self.command}: printed more than gpunode keeps of a command's output "
                f"({self.stdout_cut} bytes dropped from its start); refusing to read it cut"
            )
        return self.stdout


def quote(value: str) -> str:
    return shlex.quote(value)


def join(argv: Sequence[str]) -> str:
    return shlex.join(argv)


class Transport(Protocol):
    name: str
    inactivity_timeout: float | None
    """Seconds a command may stay silent before it is taken for hung (None: no limit); the
    executor lengthens it around apt's long steps (apt.inactivity_timeout)."""

    @property
    def connections_opened(self) -> int:
        """Connections opened so far: a count that moved between two commands is a reconnect."""
        ...

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

    def get(self, path: str, *, sudo: bool = False) -> bytes: ...

    def forward(self, direction: Direction, socket_path: str, port: int = 0) -> int:
        """Join a unix socket on the controller and a TCP port on the host's loopback
        (127.0.0.1) through this connection, until close(). "to-host": the controller
        listens on `socket_path` (which must not exist yet) and each connection reaches the
        host's 127.0.0.1:`port`. "from-host": the host listens on 127.0.0.1, on `port` or
        (0) on a free port it picks, and each connection reaches `socket_path`. Returns the
        host's port. Raises TransportError when the host refuses (AllowTcpForwarding)."""
        ...

    def close(self) -> None: ...
