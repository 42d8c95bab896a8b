"""`connection: local`: run on the controller itself, with the same interface as SSH."""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Sequence

from gpunode.transport.base import CommandResult, Direction, OutputCallback, TransportError
from gpunode.transport.become import prepare, read_with_sudo
from gpunode.transport.driver import drive
from gpunode.transport.pipes import PipeProcess
from gpunode.transport.relay import Relay, loopback_dialer, unix_dialer, unix_listener
from gpunode.transport.secret import Secret


class LocalTransport:
    """Commands through /bin/sh on this machine; sudo only when not already root."""

    def __init__(
        self,
        name: str = "localhost",
        *,
        become_password: Secret | None = None,
        command_timeout: float | None = 1800.0,
    ) -> None:
        self.name = name
        self._password = become_password
        self._timeout = command_timeout
        self._relay: Relay | None = None
        self.inactivity_timeout: float | None = None  # a local command is never cut for silence
        self.connections_opened = 0  # no connection to lose

    def connect(self) -> None:
        pass

    def close(self) -> None:
        if self._relay is not None:
            self._relay.close()
            self._relay = None

    def forward(self, direction: Direction, socket_path: str, port: int = 0) -> int:
        """The host is this machine: the same pumps as paramiko's, without SSH."""
        self._relay = self._relay or Relay()
        if direction == "to-host":
            self._relay.serve(unix_listener(socket_path), loopback_dialer(port))
            return port
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", port))
        except OSError as exc:
            listener.close()
            raise TransportError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
        listener.listen(64)
        self._relay.serve(listener, unix_dialer(socket_path))
        return int(listener.getsockname()[1])

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
        become_as = None
        if sudo and os.geteuid() != 0:
            become_as = f"{getpass.getuser()}@{socket.gethostname()}"
        cmd, script, become = prepare(command, env, become_as, self._password)
        proc = PipeProcess(["/bin/sh", "-c", script])
        return drive(
            proc,
            shown=cmd,
            stdin=stdin,
            timeout=timeout if timeout is not None else self._timeout,
            on_output=on_output,
            become=become,
        )

    def get(self, path: str, *, sudo: bool = False) -> bytes:
        if sudo and os.geteuid() != 0:
            return read_with_sudo(self, path)
        with open(path, "rb") as fh:
            return fh.read()
