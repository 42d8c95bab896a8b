"""`become: none`: every command runs as the login user, sudo is never used."""

from __future__ import annotations

from collections.abc import Sequence

from gpunode.transport.base import CommandResult, OutputCallback
from gpunode.transport.wrapped import Wrapped


class NoBecome(Wrapped):
    """Wraps a transport so that a request for root runs as the login user instead (who
    is root already, or gets the change refused: see execute.host)."""

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
        return self.inner.run(command, stdin=stdin, timeout=timeout, on_output=on_output, env=env)

    def get(self, path: str, *, sudo: bool = False) -> bytes:
        return self.inner.get(path)
