"""A transport around another: everything passed through, for wrappers that change one thing."""

from __future__ import annotations

from collections.abc import Sequence

from gpunode.transport.base import CommandResult, Direction, OutputCallback, Transport


class Wrapped:
    """Passes every call of the Transport protocol to `inner`; a subclass overrides what
    it changes (NoBecome: sudo; Counting: the round trips)."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.name = inner.name

    @property
    def inactivity_timeout(self) -> float | None:
        return self.inner.inactivity_timeout

    @inactivity_timeout.setter
    def inactivity_timeout(self, seconds: float | None) -> None:
        self.inner.inactivity_timeout = seconds

    @property
    def connections_opened(self) -> int:
        return self.inner.connections_opened

    def connect(self) -> None:
        self.inner.connect()

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
        return self.inner.run(
            command, sudo=sudo, stdin=stdin, timeout=timeout, on_output=on_output, env=env
        )

    def get(self, path: str, *, sudo: bool = False) -> bytes:
        return self.inner.get(path, sudo=sudo)

    def forward(self, direction: Direction, socket_path: str, port: int = 0) -> int:
        return self.inner.forward(direction, socket_path, port)

    def close(self) -> None:
        self.inner.close()
