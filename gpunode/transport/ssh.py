"""SSH with paramiko: one connection per host for the whole run, a channel per command.

Every step has a deadline (TCP connect, banner, key exchange, auth, each command),
so a host that accepts TCP and then never speaks is reported unreachable rather
than hanging the run. Agent forwarding is never requested.
"""

from __future__ import annotations

import contextlib
import select
import shlex
import socket
import threading
import time
from collections.abc import Sequence
from functools import partial

from gpunode.inventory.model import SshSettings
from gpunode.transport._paramiko import paramiko
from gpunode.transport.base import (
    CommandResult,
    Direction,
    HostUnreachableError,
    OutputCallback,
    TransportError,
)
from gpunode.transport.become import Become, become_run, read_with_sudo
from gpunode.transport.driver import drive
from gpunode.transport.hostkeys import (
    HostKeyChangedError,
    HostKeyError,
    HostKeyRevokedError,
    KnownHosts,
    describe_changed,
    describe_revoked,
    known_hosts_name,
    policy_for,
)
from gpunode.transport.relay import Relay, unix_dialer, unix_listener
from gpunode.transport.secret import Secret
from gpunode.transport.sshconfig import Endpoint, load_config, resolve, unread
from gpunode.transport.sshfailure import no_banner

READER_WAKE = 1.0
"""Seconds paramiko's reader thread waits on a quiet connection before it looks round."""


def _tcp_keepalive(sock: socket.socket, every: float) -> None:
    """Kernel keepalives too: a peer that vanished (no FIN, no RST) breaks the socket within
    about 3 * `every` seconds even while nothing is being sent."""
    if not every:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for opt, value in (("TCP_KEEPIDLE", every), ("TCP_KEEPINTVL", every), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, opt):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), max(1, int(value)))


class _ChannelProcess:
    def __init__(self, channel: paramiko.Channel) -> None:
        self._ch = channel
        self._fd = channel.fileno()  # becomes readable on stdout, stderr or close

    def read(self, wait: float) -> tuple[bytes, bytes, bool]:
        ch = self._ch
        if not (ch.recv_ready() or ch.recv_stderr_ready()):
            # Wait for what is still missing, never spin: the fd stays readable once the
            # EOF came (paramiko sets it for good), and an exit status that comes before
            # the EOF does not make it readable. At 50 hosts the loop went round ~250
            # times a command between the two.
            if ch.eof_received and not ch.exit_status_ready():
                ch.status_event.wait(wait)  # set by the exit status or the close
            elif not (ch.eof_received or ch.closed):
                select.select([self._fd], [], [], wait)  # output, the EOF or the close
        out = err = b""
        while ch.recv_ready():
            out += ch.recv(65536)
        while ch.recv_stderr_ready():
            err += ch.recv_stderr(65536)
        done = bool(
            ch.exit_status_ready()
            and not ch.recv_ready()
            and not ch.recv_stderr_ready()
            and ch.eof_received
        )
        if ch.closed and not (ch.recv_ready() or ch.recv_stderr_ready()):
            done = True
        return out, err, done

    def write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            self._ch.sendall(data)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            self._ch.shutdown_write()

    def exit_code(self) -> int:
        code = self._ch.recv_exit_status()
        self._ch.close()
        return code if code >= 0 else 255

    def kill(self) -> None:
        self._ch.close()


CHANNELS_REMEMBERED = 1024


def _forget_old_channels(t: paramiko.Transport) -> None:
    """paramiko remembers every channel id a connection opened, to ignore messages that
    arrive for a channel already gone, and never forgets one: `top` reading processes every
    5 s grew by 12 ids a minute per host, for as long as it ran. Ids more than
    CHANNELS_REMEMBERED behind the newest, of channels no longer open, are dropped: the
    host closed those long ago (ids only grow), so nothing more can come for them."""
    seen = t.channels_seen
    if len(seen) <= 2 * CHANNELS_REMEMBERED:
        return
    with t.lock:  # open_channel adds under it; the reader thread only looks up
        newest = max(seen)
        open_ = t._channels  # type: ignore[attr-defined]  # paramiko's own map, no stub
        for chanid in list(seen):
            if newest - chanid > CHANNELS_REMEMBERED and open_.get(chanid) is None:
                del seen[chanid]


class SSHTransport:
    """A Transport over one paramiko connection (plus one per ProxyJump hop)."""

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
        self._clients: list[paramiko.SSHClient] = []  # jump hops first, the host last
        self._sftp: paramiko.SFTPClient | None = None
        self._relay: Relay | None = None
        self._lock = threading.Lock()
        self.endpoint: Endpoint | None = None
        self.connections_opened = 0
        self.channels_opened = 0
        self.inactivity_timeout: float | None = ssh.inactivity_timeout
        """Seconds a command may stay silent (see drive); HostRun lengthens it for apt."""

    # -- connection -------------------------------------------------------------------------

    def connect(self) -> None:
        with self._lock:
            if self._clients and self._active():
                return
            self._close_clients()
            try:
                ep = resolve(self.address, self.settings, load_config(self.settings.config_file))
            except (ValueError, OSError) as exc:
                raise HostUnreachableError(f"ssh config for {self.address}: {exc}") from None
            self.endpoint = ep
            try:
                self._clients.append(self._open(ep, ep.identity_files))
            except HostKeyChangedError:
                self._close_clients()
                raise
            except HostUnreachableError as exc:
                self._close_clients()
                raise self._unread_hint(exc) from None
            except BaseException:
                self._close_clients()
                raise

    def _unread_hint(self, exc: HostUnreachableError) -> HostUnreachableError:
        """The failure, and what the ssh config says that this transport did not read: a
        host defined by an Include, reached through a ProxyCommand or trusted by a
        certificate fails here and works with the system's ssh."""
        said = unread(self.settings.config_file)
        if not said:
            return exc
        return type(exc)(
            f"{exc}; the ssh config {self.settings.config_file} uses {', '.join(said)}, "
            "which the paramiko transport does not read: set ssh.transport: openssh"
        )

    def _active(self) -> bool:
        t = self._clients[-1].get_transport()
        return t is not None and t.is_active()

    def _open(self, ep: Endpoint, fallback_ids: tuple[str, ...]) -> paramiko.SSHClient:
        timeout = self.settings.connect_timeout
        sock: socket.socket | paramiko.Channel
        if ep.jump:
            via = None
            for hop in ep.jump:
                if via is None:
                    via = self._open(hop, hop.identity_files or fallback_ids)
                else:
                    via = self._open_via(via, hop, hop.identity_files or fallback_ids)
            assert via is not None
            return self._open_via(
                via,
                Endpoint(ep.alias, ep.hostname, ep.port, ep.user, ep.identity_files),
                fallback_ids,
            )
        try:
            sock = socket.create_connection((ep.hostname, ep.port), timeout=timeout)
            # small request/response packets: without this, Nagle plus delayed ACKs add ~40 ms
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _tcp_keepalive(sock, self.settings.keepalive)
        except OSError as exc:
            raise HostUnreachableError(
                f"cannot connect to {ep.hostname}:{ep.port}: {exc.strerror or exc}"
            ) from None
        return self._handshake(ep, sock, fallback_ids)

    def _open_via(
        self, via: paramiko.SSHClient, ep: Endpoint, fallback_ids: tuple[str, ...]
    ) -> paramiko.SSHClient:
        self._clients.append(via)
        t = via.get_transport()
        assert t is not None
        try:
            chan = t.open_channel(
                "direct-tcpip",
                (ep.hostname, ep.port),
                ("127.0.0.1", 0),
                timeout=self.settings.connect_timeout,
            )
        except (paramiko.SSHException, OSError) as exc:
            raise HostUnreachableError(
                f"jump host could not reach {ep.hostname}:{ep.port}: {exc}"
            ) from None
        return self._handshake(ep, chan, fallback_ids)

    def _handshake(
        self, ep: Endpoint, sock: socket.socket | paramiko.Channel, fallback_ids: tuple[str, ...]
    ) -> paramiko.SSHClient:
        s = self.settings
        timeout = s.connect_timeout
        name = known_hosts_name(ep.hostname, ep.port)
        try:
            known = KnownHosts.for_settings(s.known_hosts_file)
        except OSError as exc:
            sock.close()
            raise HostUnreachableError(
                f"cannot read known_hosts {exc.filename or s.known_hosts_file}: "
                f"{exc.strerror or exc}"
            ) from None
        client = paramiko.SSHClient()
        known.add_to(client.get_host_keys(), name)
        client.set_missing_host_key_policy(policy_for(s.host_key_policy, s.known_hosts_file, known))
        ids = list(ep.identity_files or fallback_ids)
        started = time.monotonic()
        try:
            client.connect(
                ep.hostname,
                port=ep.port,
                username=ep.user,
                key_filename=ids or None,  # type: ignore[arg-type]  # list accepted
                look_for_keys=not ids,
                allow_agent=True,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
                sock=sock,
            )
        except HostKeyError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            revoked = known.revoked(exc.key)
            if revoked is not None:
                raise HostKeyRevokedError(describe_revoked(name, exc.key, revoked)) from None
            raise HostKeyChangedError(
                describe_changed(exc, ep.hostname, ep.port, s.known_hosts_file, known)
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise HostUnreachableError(f"authentication failed for {ep.label}: {exc}") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            tr = client.get_transport()
            silent = tr is not None and not tr.remote_version
            client.close()
            raise HostUnreachableError(
                f"ssh to {ep.label} failed: "
                + no_banner(exc, silent, time.monotonic() - started, timeout)
            ) from None
        self.connections_opened += 1
        transport = client.get_transport()
        assert transport is not None
        if s.keepalive:
            transport.set_keepalive(max(1, int(s.keepalive)))
        # paramiko's reader thread wakes every 0.1 s on a quiet connection, only to see
        # whether it was closed or a keepalive is due: at 50 hosts, 500 wake-ups a second
        # for the whole run, each taking the interpreter lock. Once connected, a second is
        # soon enough for both (keepalives are seconds apart; `close` does not wait for it).
        transport.sock.settimeout(READER_WAKE)
        return client

    def _transport(self) -> paramiko.Transport:
        self.connect()
        t = self._clients[-1].get_transport()
        if t is None or not t.is_active():
            raise TransportError(f"connection to {self.name} was lost")
        return t

    def _user_at_host(self) -> str:
        ep = self.endpoint
        return f"{ep.user}@{self.name}" if ep else self.name

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
        become_as = None
        if sudo and (self.endpoint is None or self.endpoint.user != "root"):
            self.connect()
            if self.endpoint is not None and self.endpoint.user != "root":
                become_as = self._user_at_host()
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
        t = self._transport()
        _forget_old_channels(t)
        try:
            chan = t.open_session(timeout=self.settings.connect_timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            # paramiko re-raises its reader thread's EOFError (no text) when the host closed
            raise TransportError(f"cannot open a channel to {self.name}: {_said(exc)}") from None
        self.channels_opened += 1
        try:
            if become is not None and become.pty:
                chan.get_pty(term="dumb", width=200)
            chan.exec_command(f"sh -c {shlex.quote(script)}")
        except (paramiko.SSHException, OSError, EOFError) as exc:
            chan.close()
            raise TransportError(f"cannot start a command on {self.name}: {_said(exc)}") from None
        return drive(
            _ChannelProcess(chan),
            shown=cmd,
            stdin=stdin,
            timeout=limit,
            on_output=on_output,
            become=become,
            idle=self.inactivity_timeout,
        )

    # -- files ------------------------------------------------------------------------------

    def _sftp_client(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            self._transport()
            client = self._clients[-1].open_sftp()
            self.channels_opened += 1
            self._sftp = client
        return self._sftp

    def get(self, path: str, *, sudo: bool = False) -> bytes:
        if sudo:
            return read_with_sudo(self, path)
        try:
            with self._sftp_client().open(path, "rb") as fh:
                return fh.read()
        except OSError as exc:
            raise TransportError(f"cannot read {path} on {self.name}: {exc}") from None

    # -- forwards ---------------------------------------------------------------------------

    def forward(self, direction: Direction, socket_path: str, port: int = 0) -> int:
        """direct-tcpip channels ("to-host") or a tcpip-forward request ("from-host"), each
        connection pumped by a Relay; they end with the connection."""
        t = self._transport()
        relay = self._relay = self._relay or Relay()
        if direction == "to-host":

            def dial() -> paramiko.Channel:
                where = ("127.0.0.1", port)
                return t.open_channel("direct-tcpip", where, ("127.0.0.1", 0), timeout=30)

            relay.serve(unix_listener(socket_path), dial)
            return port

        def arrived(channel: paramiko.Channel, *_: object) -> None:
            # paramiko calls this in its own thread: join in another
            join = partial(relay.join, channel, unix_dialer(socket_path))
            threading.Thread(target=join, daemon=True).start()

        try:
            return int(t.request_port_forward("127.0.0.1", port, handler=arrived))
        except (paramiko.SSHException, OSError) as exc:
            raise TransportError(
                f"{self.name} refused to forward 127.0.0.1:{port} to gpunode "
                f"(sshd's AllowTcpForwarding, or the port is taken): {exc}"
            ) from None

    # -- teardown ---------------------------------------------------------------------------

    def _close_clients(self) -> None:
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        if self._sftp is not None:
            with contextlib.suppress(Exception):
                self._sftp.close()
            self._sftp = None
        for client in reversed(self._clients):
            with contextlib.suppress(Exception):
                client.close()
        self._clients = []

    def close(self) -> None:
        with self._lock:
            self._close_clients()


def _said(exc: BaseException) -> str:
    """paramiko's exception in words: an EOFError says nothing of itself."""
    if isinstance(exc, EOFError) and not str(exc):
        return "the host closed the SSH connection"
    return str(exc) or type(exc).__name__
