"""`connection: local`: run on the controller itself, with the same interface as SSH."""

from __future__ import annotations

import contextlib
import getpass
import os
import selectors
import signal
import socket
import subprocess
import tempfile
from collections.abc import Sequence

from gpunode.transport.base import CommandResult, OutputCallback, TransportError
from gpunode.transport.become import prepare, read_with_sudo
from gpunode.transport.driver import drive
from gpunode.transport.secret import Secret, child_env


class _LocalProcess:
    def __init__(self, script: str) -> None:
        self._p = subprocess.Popen(
            ["/bin/sh", "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # so a timeout can kill the whole process group
            env=child_env(),  # never the sudo password's variable
        )
        assert self._p.stdout and self._p.stderr
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._p.stdout, selectors.EVENT_READ, "stdout")
        self._sel.register(self._p.stderr, selectors.EVENT_READ, "stderr")
        self._stdin_open = True

    def read(self, wait: float) -> tuple[bytes, bytes, bool]:
        out, err = b"", b""
        if self._sel.get_map():
            for key, _ in self._sel.select(wait):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    self._sel.unregister(key.fileobj)
                elif key.data == "stdout":
                    out += chunk
                else:
                    err += chunk
        if not self._sel.get_map():
            self._p.wait()
            return out, err, True
        return out, err, False

    def write(self, data: bytes) -> None:
        assert self._p.stdin
        with contextlib.suppress(BrokenPipeError):
            self._p.stdin.write(data)
            self._p.stdin.flush()

    def close_stdin(self) -> None:
        if self._stdin_open and self._p.stdin:
            self._stdin_open = False
            with contextlib.suppress(BrokenPipeError):
                self._p.stdin.close()

    def exit_code(self) -> int:
        code = self._p.wait()
        return code if code >= 0 else 128 - code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._p.pid, signal.SIGKILL)
        self._p.wait()
        self._sel.close()


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
        proc = _LocalProcess(script)
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
