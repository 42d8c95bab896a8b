"""A transport that counts its round trips: each command run and each file read is one."""

from __future__ import annotations

from collections.abc import Sequence

from gpunode.transport.base import CommandResult, OutputCallback, Transport
from gpunode.transport.wrapped import Wrapped


class Counting(Wrapped):
    """Wraps a transport; `round_trips` is what the host was asked, whoever asked (the
    executor's reads and changes, the host lock, smoke tests, doctor), counted where it
    happens rather than by each caller."""

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)
        self.round_trips = 0

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
        self.round_trips += 1  # before it runs: a command cut half-way was a round trip too
        return super().run(
            command, sudo=sudo, stdin=stdin, timeout=timeout, on_output=on_output, env=env
        )

    def get(self, path: str, *, sudo: bool = False) -> bytes:
        self.round_trips += 1
        return super().get(path, sudo=sudo)
