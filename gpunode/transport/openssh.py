"""SSH with the system's OpenSSH client: one master connection per host, a client per command.

`connect()` starts a ControlMaster (its socket in a private 0700 directory); every
`run` is an `ssh` that rides on it, so a command costs a local process, not a login.
Whatever OpenSSH supports applies: Include, ProxyCommand, ProxyJump, Match,
/etc/ssh/ssh_config, every known_hosts file, host certificates, GSSAPI.

Values reach `ssh` as separate argv elements, never through a shell on the controller;
the remote command is one argument, `sh -c <quoted script>`, as with paramiko. sudo's
password goes to the command's stdin once sudo asks (see become.py): never argv or the
environment. ssh runs in a session of its own: no controlling terminal, so nothing
can prompt.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from functools import partial

from gpunode.inventory import sshcommands
from gpunode.inventory.model import SshSettings
from gpunode.transport.base import (
    CommandResult,
    Direction,
    HostUnreachableError,
    OutputCallback,
    TransportError,
)
from gpunode.transport.become import Become, become_run, read_with_sudo
from gpunode.transport.driver import drive
from gpunode.transport.pipes import PipeProcess
from gpunode.transport.secret import Secret, child_env
from gpunode.transport.sshcli import SshCommand, parse_effective
from gpunode.transport.sshfailure import classify, is_ssh_failure, jump_failure

INVENTORY_DEFAULT_USER = SshSettings().user


def _control_dir() -> str:
    """A fresh 0700 directory for the control socket; short, as a socket path must be."""
    base = tempfile.gettempdir()
    if len(base) > 40:
        base = "/tmp"
    return tempfile.mkdtemp(prefix="gpunode-ssh-", dir=base)


class OpenSSHTransport:
    """A Transport over `ssh` with one ControlMaster per host."""

    def __init__(
        self,
        name: str,
        address: str,
        ssh: SshSettings,
        *,
        become_password: Secret | None = None,
        become_pty: bool = False,
    ) -> None:
        self.name = name
        self.address = address
        self.settings = ssh
        self._password = become_password
        self._pty = become_pty
        """sudo'ed commands run on a terminal: set by become_pty, or once sudo asked for one."""
        self._lock = threading.Lock()
        self._dir: str | None = None
        self._login_user: str | None = None  # passed when the inventory and config name none
        self.effective: dict[str, str] = {}
        """The host's ssh settings as OpenSSH resolved them (`ssh -G`)."""
        self.connections_opened = 0
        self.channels_opened = 0
        self.inactivity_timeout: float | None = ssh.inactivity_timeout
        """Seconds a command may stay silent (see drive); HostRun lengthens it for apt."""

    # -- connection -------------------------------------------------------------------------

    def _command(self) -> SshCommand:
        assert self._dir is not None
        binary = shutil.which("ssh")
        if binary is None:
            raise HostUnreachableError("ssh.transport openssh needs the `ssh` client on PATH")
        return SshCommand(self.address, self.settings, self._dir, binary)

    def _env(self) -> dict[str, str]:
        # never an askpass program: BatchMode covers this connection, not ProxyJump hops
        return {**child_env(), "SSH_ASKPASS_REQUIRE": "never"}

    def _ssh(
        self, *args: str, timeout: float, forwards: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """`ssh OPTIONS args -- address` run to completion (killed at `timeout`)."""
        cmd = self._command()
        argv = [*cmd.argv(*args, login_user=self._login_user, forwards=forwards)]
        argv += cmd.destination()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
            env=self._env(),
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def _master_up(self) -> bool:
        """Whether a master answers on the control socket; a stale socket (a master that
        was killed) is removed, so that connect() starts a new one."""
        if self._dir is None:
            return False
        for entry in os.scandir(self._dir):
            with socket.socket(socket.AF_UNIX) as sock:
                try:
                    sock.connect(entry.path)
                    return True
                except OSError:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        return False

    def connect(self) -> None:
        with self._lock:
            if self._master_up():
                return
            if self._dir is None:
                self._dir = _control_dir()
            s = self.settings
            # checked again here: `ssh -G` already runs a config's `Match exec`
            if s.config_file is not None and "config_file" in s.model_fields_set:
                why = sshcommands.refusal(s.config_file)
                if why:
                    raise HostUnreachableError(f"ssh config for {self.address}: {why}")
            # How OpenSSH resolves the host (config, Include, Match): no network yet.
            try:
                res = self._ssh("-G", timeout=30)
            except subprocess.TimeoutExpired:
                raise HostUnreachableError(f"ssh -G {self.address} did not finish") from None
            if res.returncode != 0:
                said = " ".join(res.stderr.split())[:300]
                raise HostUnreachableError(f"ssh config for {self.address}: {said}")
            self.effective = parse_effective(res.stdout)
            if "user" not in s.model_fields_set and self.effective.get("user") in (
                None,
                getpass.getuser(),
            ):
                self._login_user = INVENTORY_DEFAULT_USER  # the config names none
            limit = 4 * s.connect_timeout + 5  # TCP, banner, key exchange, authentication
            try:
                res = self._ssh("-o", "LogLevel=DEBUG1", "-N", "-f", timeout=limit)
            except subprocess.TimeoutExpired:
                raise HostUnreachableError(
                    f"ssh to {self.label} did not log in within {limit:g}s"
                ) from None
            if res.returncode != 0 or not self._master_up():
                raise self._failure(res.stderr)
            self.connections_opened += 1

    @property
    def user(self) -> str:
        """The login user: the inventory's, else the ssh config's, else the inventory's
        default."""
        if "user" in self.settings.model_fields_set:
            return self.settings.user
        return self._login_user or self.effective.get("user") or INVENTORY_DEFAULT_USER

    @property
    def label(self) -> str:
        e = self.effective
        return f"{self.user}@{e.get('hostname', self.address)}:{e.get('port', self.settings.port)}"

    def _failure(self, stderr: str) -> TransportError:
        e = self.effective
        host, port = e.get("hostname", self.address), e.get("port", "22")
        hop = jump_failure(stderr, env=self._env(), timeout=self.settings.connect_timeout + 5,
                           config=self.settings.config_file)  # fmt: skip
        if hop is not None:
            return hop
        return classify(
            stderr,
            label=self.label,
            name=host if port == "22" else f"[{host}]:{port}",
            known_hosts_files=[
                os.path.expanduser(f)
                for key in ("userknownhostsfile", "globalknownhostsfile")
                for f in e.get(key, "").split()
            ],
        )

    # -- commands ---------------------------------------------------------------------------

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
        self.connect()
        become_as = f"{self.user}@{self.name}" if sudo and self.user != "root" else None
        limit = timeout if timeout is not None else self.settings.command_timeout
        attempt = partial(self._exec, stdin=stdin, limit=limit, on_output=on_output)
        res, self._pty = become_run(attempt, command, env, become_as, self._password, self._pty)
        return res

    def _exec(
        self,
        cmd: str,
        script: str,
        become: Become | None,
        stdin: bytes | None,
        limit: float | None,
        on_output: OutputCallback | None,
    ) -> CommandResult:
        """`sh -c script` on the host (sudo's wrapping done), on a terminal for `become.pty`."""
        tty = ("-tt",) if become is not None and become.pty else ("-T",)
        ssh = self._command()
        argv = [
            *ssh.argv("-o", "LogLevel=ERROR", *tty, login_user=self._login_user, master="no"),
            *ssh.destination(),
            f"sh -c {shlex.quote(script)}",
        ]
        self.channels_opened += 1
        res = drive(
            PipeProcess(argv, env=self._env()),
            shown=cmd,
            stdin=stdin,
            timeout=limit,
            on_output=on_output,
            become=become,
            idle=self.inactivity_timeout,
        )
        if is_ssh_failure(res.exit_code, res.stderr):
            raise self._failure(res.stderr)
        return res

    # -- files ------------------------------------------------------------------------------

    def get(self, path: str, *, sudo: bool = False) -> bytes:
        """Through base64 (a command's output is read as text)."""
        if sudo:
            return read_with_sudo(self, path)
        import base64

        res = self.run(["base64", "-w0", "--", path])
        if not res.ok:
            raise TransportError(f"cannot read {path} on {self.name}: {res.stderr.strip()}")
        return base64.b64decode(res.whole_stdout)

    # -- forwards ---------------------------------------------------------------------------

    def forward(self, direction: Direction, socket_path: str, port: int = 0) -> int:
        """`ssh -O forward -L` or `-R` on the master: OpenSSH carries the connections (the
        socket it makes is 0600, StreamLocalBindMask); they end with the master."""
        self.connect()
        spec = (
            ("-L", f"{socket_path}:127.0.0.1:{port}")
            if direction == "to-host"
            else ("-R", f"127.0.0.1:{port}:{socket_path}")
        )
        try:
            res = self._ssh(
                "-o", "LogLevel=ERROR", "-O", "forward", *spec, timeout=30, forwards=True
            )
        except subprocess.TimeoutExpired:
            raise TransportError(f"ssh -O forward to {self.name} did not finish") from None
        said = " ".join(res.stderr.split())[:300]
        if res.returncode != 0:
            raise TransportError(
                f"{self.name} refused to forward {' '.join(spec)} (sshd's AllowTcpForwarding, "
                f"or the port is taken): {said or f'ssh exited {res.returncode}'}"
            )
        if direction == "from-host" and port == 0:
            allocated = res.stdout.strip()
            if not allocated.isdigit():
                raise TransportError(f"ssh -O forward to {self.name} named no port: {said}")
            return int(allocated)
        return port

    # -- teardown ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._dir is None:
                return
            if self._master_up():
                with contextlib.suppress(subprocess.TimeoutExpired, TransportError):
                    self._ssh("-O", "exit", timeout=10)
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
