"""Transport.forward: a unix socket on the controller joined to the host's loopback, both
ways, through paramiko, the real OpenSSH client and `connection: local`. The host listens
on 127.0.0.1 only, and nothing listens once the transport is closed."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunode.transport.base import Transport
from gpunode.transport.local import LocalTransport
from tests.conftest import until

from .conftest import MakeTransport
from .sshd import SshServer


def _echo(listener: socket.socket) -> None:
    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(b"echo:" + data)

    threading.Thread(target=serve, daemon=True).start()


@pytest.fixture
def tcp_echo() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        _echo(listener)
        yield int(listener.getsockname()[1])


@pytest.fixture
def unix_echo(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "echo.sock")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen()
        _echo(listener)
        yield path


def _talk(sock: socket.socket) -> bytes:
    with sock:
        sock.settimeout(10)
        sock.sendall(b"ping")
        return sock.recv(100)


def _unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    return sock


def _refused(address: tuple[str, int]) -> bool:
    try:
        socket.create_connection(address, timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def _both_ways(t: Transport, tmp: Path, tcp_echo: int, unix_echo: str) -> None:
    to_host = str(tmp / "to-host.sock")
    assert t.forward("to-host", to_host, tcp_echo) == tcp_echo
    assert oct(Path(to_host).stat().st_mode & 0o777) == "0o600"
    assert _talk(_unix(to_host)) == b"echo:ping"
    port = t.forward("from-host", unix_echo)
    assert port > 0
    assert _talk(socket.create_connection(("127.0.0.1", port))) == b"echo:ping"
    assert _talk(socket.create_connection(("127.0.0.1", port))) == b"echo:ping"  # again
    assert _refused(("127.0.0.2", port)), "the host's listener is not on loopback only"
    t.close()
    until(lambda: _refused(("127.0.0.1", port)), 10, "the host's listener gone after close()")
    with contextlib.suppress(FileNotFoundError), pytest.raises(ConnectionRefusedError):
        _unix(to_host).close()


def test_ssh_forwards_both_ways(
    ssh_server: SshServer, make_transport: MakeTransport, tmp_path: Path, tcp_echo: int,
    unix_echo: str,
) -> None:  # fmt: skip
    t = make_transport("h", ssh_server.host, ssh_server.settings())
    _both_ways(t, tmp_path, tcp_echo, unix_echo)


def test_local_forwards_both_ways(tmp_path: Path, tcp_echo: int, unix_echo: str) -> None:
    _both_ways(LocalTransport("h"), tmp_path, tcp_echo, unix_echo)
