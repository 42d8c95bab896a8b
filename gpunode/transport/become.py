"""sudo: wrap a command, then watch its stderr for sudo's prompt and our start marker.

The password, when there is one, is written to the command's stdin after sudo's
own prompt (a random marker) shows on stderr; it never appears on a command
line. A second prompt means the password was wrong: we stop at once rather than
let sudo ask three times.

Both sudo and sudo-rs are understood: sudo-rs frames the prompt as
`[sudo: PROMPT] Password: ` (and before 0.2.5 ignored -p, always asking
`[sudo: authenticate] Password: `), and words its refusals differently.

On a terminal (`pty`, for sudoers' `Defaults requiretty`) sudo's prompt and the
command's output share one stream, so the exchange reads stdout; echo is turned
off before sudo starts, and the command's stdin travels base64-encoded through
the terminal's line discipline (then ^D), so that any bytes, and an end of file,
reach it intact.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gpunode.transport.base import BecomeError, CommandResult, Transport, TransportError, join
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


# What sudo (1.9) and sudo-rs say when they refuse, lower-cased.
_NEEDS_PASSWORD = ("a password is required", "interactive authentication is required",
                   "interaction is required")  # fmt: skip
_WRONG_PASSWORD = ("incorrect password", "sorry, try again", "authentication failed",
                   "incorrect authentication attempt")  # fmt: skip
_NEEDS_TTY = ("you must have a tty to run sudo", "a terminal is required")
# sudo-rs's own prompt, whatever -p said (before 0.2.5) or for a PAM prompt it frames
_SUDO_RS_PROMPT = r"\[sudo: authenticate\] [^\n]*?: ?"


def needs_password_error(user_at_host: str) -> BecomeError:
    return BecomeError(
        f"sudo: a password is required for {user_at_host}: "
        "use -K/--ask-become-pass or set become_password_env"
    )


@dataclass
class Become:
    """One sudo'ed command: its wrapped text and the state of the prompt exchange.

    `pty`: the command runs on a terminal (see the module's docstring)."""

    user_at_host: str
    password: Secret | None
    pty: bool = False
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))
    started: bool = False
    needs_tty: bool = False
    """sudo refused for want of a terminal (requiretty): the command may be tried on one."""
    _prompts: int = 0
    _buffer: str = ""

    @property
    def prompt(self) -> str:
        return f"[gpunode-sudo-{self.nonce}]"

    @property
    def marker(self) -> str:
        return f"GPUNODE-BECOME-OK-{self.nonce}"

    @property
    def stream(self) -> Literal["stdout", "stderr"]:
        """Where sudo's prompt and the start marker arrive."""
        return "stdout" if self.pty else "stderr"

    def _prompt_re(self) -> re.Pattern[str]:
        ours = re.escape(self.prompt)
        # sudo-rs 0.2.5+ honours -p inside its frame: "[sudo: <ours>] Password: "
        return re.compile(rf"(?:\[sudo: )?{ours}(?:\] [^\n]*?: ?)?|{_SUDO_RS_PROMPT}")

    def wrap(self, script: str) -> str:
        body = f"base64 -d | sh -c {shlex.quote(script)}" if self.pty else script
        inner = f"printf '%s\\n' {self.marker} >&2\n{body}"
        sudo = (
            "sudo -n -H" if self.password is None else f"sudo -H -S -p {shlex.quote(self.prompt)}"
        )
        command = f"{sudo} -- sh -c {shlex.quote(inner)}"
        # the terminal's line discipline as a login's (ssh over a ControlMaster gives it
        # zeroed modes: raw, no ^D), with no echo of what is typed (the password, should
        # sudo not turn echo off itself) and no \r added to the output's line ends
        return f"stty sane -echo -onlcr 2>/dev/null; {command}" if self.pty else command

    def stdin_bytes(self, data: bytes | None) -> bytes:
        """The command's stdin as it must be written: on a terminal, base64 lines then ^D
        (the terminal's end of file), which `base64 -d` on the host turns back."""
        if not self.pty:
            return data or b""
        return base64.encodebytes(data or b"") + b"\x04"

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
            prompt = self._prompt_re().search(self._buffer)
            if prompt is not None:
                self._prompts += 1
                self._buffer = self._buffer[prompt.end() :]
                if self.password is None:
                    raise needs_password_error(self.user_at_host)
                if self._prompts > 1:
                    raise BecomeError(f"sudo: incorrect password for {self.user_at_host}")
                to_send = (self.password.reveal() + "\n").encode()
                continue
            return "", to_send

    def failure(self, exit_code: int) -> BecomeError:
        """Why sudo ended before the command started (called when it never did)."""
        text = self._buffer
        if self.password is not None:  # never shown back, even had a terminal echoed it
            text = text.replace(self.password.reveal(), "***")
        said = " ".join(text.split()) or f"exit {exit_code}"
        low = said.lower()
        if any(s in low for s in _NEEDS_PASSWORD):
            return needs_password_error(self.user_at_host)
        if any(s in low for s in _WRONG_PASSWORD):
            return BecomeError(f"sudo: incorrect password for {self.user_at_host}")
        self.needs_tty = any(s in low for s in _NEEDS_TTY)
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


def become_run(
    attempt: Callable[[str, str, Become | None], CommandResult],
    command: str | Sequence[str],
    env: dict[str, str] | None,
    user_at_host: str | None,
    password: Secret | None,
    pty: bool,
) -> tuple[CommandResult, bool]:
    """A transport's `run` through sudo for `user_at_host` (None: as the login user), on a
    terminal when `pty`: `attempt(shown, script, become)` runs the host's `sh -c script`.
    sudoers' requiretty refuses sudo without a terminal, having run nothing: the command
    then runs again on one. Returns its result and whether the host's later commands need
    a terminal too."""
    shown, script, _ = prepare(command, env, None, None)
    if user_at_host is None:
        return attempt(shown, script, None), pty
    become = Become(user_at_host, password, pty=pty)
    try:
        return attempt(shown, become.wrap(script), become), pty
    except BecomeError:
        if pty or not become.needs_tty:
            raise
    become = Become(user_at_host, password, pty=True)
    return attempt(shown, become.wrap(script), become), True


def read_with_sudo(transport: Transport, path: str) -> bytes:
    """A root-only file's bytes, through `sudo base64` (the output channel is text)."""
    import base64

    res = transport.run(["base64", "-w0", "--", path], sudo=True)
    if not res.ok:
        raise TransportError(f"cannot read {path}: {res.stderr.strip()}")
    return base64.b64decode(res.whole_stdout)
