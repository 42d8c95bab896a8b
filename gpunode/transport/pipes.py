"""A child process on the controller, read through pipes: the `Process` that `drive` runs.

Used for `connection: local` (/bin/sh) and for the openssh transport (the `ssh` client).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
from collections.abc import Sequence

from gpunode.transport.secret import child_env


class PipeProcess:
    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self._p = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # so a timeout can kill the whole process group
            env=child_env() if env is None else env,  # never the sudo password's variable
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
