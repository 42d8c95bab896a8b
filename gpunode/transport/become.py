"""sudo: wrap a command, then watch its stderr for sudo's prompt and our start marker.

The password, when there is one, is written to the command's stdin after sudo's
own prompt (a random marker) shows on stderr; it never appears on a command
line. A second prompt means the password was wrong: we stop at once rather than
let sudo ask three times.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunode.transport.base import BecomeError, Transport, TransportError, join
from gpunode.transport.secret import Secret


def env_prefix(env: dict[str, str] | None) -> str:
    """`export K=V` lines for the shell script; names are checked, values quoted."""
    if not env:
        return ""
    lines = []
    for key, value in env.items():
        if not key.isidentifier() or not key.isascii():
            raise ValueError(f"bad environment variable name {key!r}")
        lines.append(f"export {key}={shlex.quote(value)}\n")
    return "".join(lines)


@dataclass
class Become:
    """One sudo'ed command: its wrapped text and the state of the prompt exchange."""

    user_at_host: str
    password: Secret | None
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))
    started: bool = False
    _prompts: int = 0
    _buffer: str = ""
    _password_sent: bool = False

    @property
    def prompt(self) -> str:
        return f"[gpunode-sudo-{self.nonce}]"

    @property
    def marker(self) -> str:
        return f"GPUNODE-BECOME-OK-{self.nonce}"

    def wrap(self, script: str) -> str:
        inner = f"printf '%s\\n' {self.marker} >&2\n{script}"
        if self.password is None:
            return f"sudo -n -H -- sh -c {shlex.quote(inner)}"
        return f"sudo -H -S -p {shlex.quote(self.prompt)} -- sh -c {shlex.quote(inner)}"

    def feed_stderr(self, text: str) -> tuple[str, bytes | None]:
        """Consume stderr before the command starts.

        Returns (text to pass on as the command's stderr, bytes to write to stdin now).
        Raises BecomeError on a wrong or missing password.
        """
        if self.started:
            return text, None
        self._buffer += text
        to_send: bytes | None = None
        while True:
            if self.marker in self._buffer:
                _, _, after = self._buffer.partition(self.marker)
                self.started = True
                self._buffer = ""
                rest = after[1:] if after.startswith("\n") else after
                return rest, to_send
            if self.prompt in self._buffer:
                self._prompts += 1
                self._buffer = self._buffer.split(self.prompt, 1)[1]
                if self.password is None:
                    raise BecomeError(
                        f"sudo: a password is required for {self.user_at_host}: "
                        "use -K/--ask-become-pass or set become_password_env"
                    )
                if self._prompts > 1:
                    raise BecomeError(f"sudo: incorrect password for {self.user_at_host}")
                to_send = (self.password.reveal() + "\n").encode()
                self._password_sent = True
                continue
            return "", to_send

    def failure(self, exit_code: int) -> BecomeError:
        """Why sudo ended before the command started (called when it never did)."""
        said = " ".join(self._buffer.split()) or f"exit {exit_code}"
        if "a password is required" in said:
            return BecomeError(
                f"sudo: a password is required for {self.user_at_host}: "
                "use -K/--ask-become-pass or set become_password_env"
            )
        if "incorrect password" in said:
            return BecomeError(f"sudo: incorrect password for {self.user_at_host}")
        return BecomeError(f"sudo failed for {self.user_at_host}: {said[:300]}")


def prepare(
    command: str | Sequence[str],
    env: dict[str, str] | None,
    become_as: str | None,
    password: Secret | None,
) -> tuple[str, str, Become | None]:
    """What every transport's `run` starts with: the command as shown (an argv list quoted),
    the script the host's `sh -c` runs (the environment's exports, then the command, wrapped
    in sudo when `become_as`, the user@host sudo is for, is given), and that sudo exchange."""
    shown = command if isinstance(command, str) else join(command)
    script = env_prefix(env) + shown
    if become_as is None:
        return shown, script, None
    become = Become(become_as, password)
    return shown, become.wrap(script), become


def read_with_sudo(transport: Transport, path: str) -> bytes:
    """A root-only file's bytes, through `sudo base64` (the output channel is text)."""
    import base64

    res = transport.run(["base64", "-w0", "--", path], sudo=True)
    if not res.ok:
        raise TransportError(f"cannot read {path}: {res.stderr.strip()}")
    return base64.b64decode(res.stdout)
