"""paramiko's failures reach the user as gpunode's messages, never as its logger's
tracebacks: a port that accepts TCP and closes at once is told apart from one that stays
silent. Real processes against loopback sockets; no sshd needed."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunode.exitcodes import ExitCode


@pytest.fixture
def closing_port() -> Iterator[int]:
    """A port that accepts every connection and closes it without a word."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def test_a_port_that_closes_at_once_is_no_traceback_and_no_banner_timeout(
    closing_port: int, tmp_path: Path
) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "defaults:\n  ssh: {config_file: null, connect_timeout: 10, "
        f"known_hosts_file: {tmp_path}/known_hosts}}\n"
        f"hosts:\n  gpu-01: {{address: 127.0.0.1, ssh: {{port: {closing_port}}}}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gpunode", "facts", str(inv)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == ExitCode.UNREACHABLE, done.stderr
    shown = done.stdout + done.stderr
    assert "Traceback" not in shown and "Exception (client)" not in shown, shown
    assert "no SSH banner within 10s" not in shown  # it closed at once: no wait was involved
    assert (
        f"ssh to ubuntu@127.0.0.1:{closing_port} failed: the port accepted TCP, then closed "
        "the connection after 0." in shown
    ), shown
    assert "it is not an SSH server, or sshd turned this client away" in shown


def test_a_connection_the_host_closed_is_a_transport_error_in_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """paramiko re-raises its reader thread's EOFError, which has no text, when the host
    closes the connection as a channel opens: the executor gets a TransportError that says
    so (it reported a host as failed with the message 'EOFError')."""
    from gpunode.inventory.model import SshSettings
    from gpunode.transport.base import TransportError
    from gpunode.transport.ssh import SSHTransport

    class Closed:
        def __init__(self) -> None:
            self.channels_seen: dict[int, bool] = {}  # as paramiko's has (ssh.py prunes it)

        def open_session(self, timeout: float | None = None) -> None:
            raise EOFError()

    t = SSHTransport("gpu-01", "127.0.0.1", SshSettings())
    monkeypatch.setattr(t, "_transport", lambda: Closed())
    with pytest.raises(TransportError) as caught:
        t.run("true")
    said = "cannot open a channel to gpu-01: the host closed the SSH connection"
    assert str(caught.value) == said
