"""`connection: local`: run on the controller itself, with the same interface as SSH."""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import tempfile
from collections.abc import Sequence

from gpunode.transport.base import CommandResult, OutputCallback, TransportError
from gpunode.transport.become import prepare, read_with_sudo
from gpunode.transport.driver import drive
from gpunode.transport.pipes import PipeProcess
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

    def connect(self) -> None:
        pass

    def close(self) -> None:
        pass

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

    def put(self, data: bytes, path: str, *, mode: int = 0o644, sudo: bool = False) -> None:
        if sudo and os.geteuid() != 0:
            with tempfile.NamedTemporaryFile(prefix="gpunode-") as tmp:
                tmp.write(data)
                tmp.flush()
                os.chmod(tmp.name, 0o644)
                res = self.run(["install", "-m", f"{mode:o}", tmp.name, path], sudo=True)
            if not res.ok:
                raise TransportError(f"cannot write {path}: {res.stderr.strip()}")
            return
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp_path = tempfile.mkstemp(prefix=".gpunode-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp_path, mode)
            os.replace(tmp_path, path)  # atomic: readers see the old or the new file
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_path)
            raise

    def get(self, path: str, *, sudo: bool = False) -> bytes:
        if sudo and os.geteuid() != 0:
            return read_with_sudo(self, path)
        with open(path, "rb") as fh:
            return fh.read()
