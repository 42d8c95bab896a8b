"""A command's end over paramiko: the output's EOF and the exit status come in two
messages, in either order, and the controller waits for the second without spinning (at
50 hosts it went round about 250 times a command between them, on the controller's CPU)."""

from __future__ import annotations

import time

import pytest

from gpunode.transport import ssh
from gpunode.transport.ssh import SSHTransport

from .sshd import SshServer

ENDS = {
    # the output ends first: the exit status comes 0.5 s after the EOF
    "eof first": ("exec >&- 2>&-; sleep 0.5; exit 7", "", 7),
    # the shell exits first; a child keeps the output open 0.5 s more
    "exit status first": ("( sleep 0.5; echo late ) & exit 3", "late\n", 3),
}


def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The wait of each read of a command's channel, from now on."""
    reads: list[float] = []
    real = ssh._ChannelProcess.read

    def counted(self: ssh._ChannelProcess, wait: float) -> tuple[bytes, bytes, bool]:
        reads.append(wait)
        return real(self, wait)

    monkeypatch.setattr(ssh._ChannelProcess, "read", counted)
    return reads


@pytest.mark.parametrize("end", list(ENDS))
def test_the_end_of_a_command_is_waited_for_not_polled(
    ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, end: str
) -> None:
    command, out, code = ENDS[end]
    reads = counted_reads(monkeypatch)
    t = SSHTransport("t1", "127.0.0.1", ssh_server.settings())
    try:
        t.run("true")  # connected: the handshake's CPU is not the command's
        reads.clear()
        cpu, wall = time.thread_time(), time.monotonic()
        res = t.run(command, timeout=30)
        cpu, wall = time.thread_time() - cpu, time.monotonic() - wall
    finally:
        t.close()
    assert (res.stdout, res.exit_code) == (out, code)
    assert wall >= 0.5
    # waits of at most 0.2 s each, woken by each message: a dozen at most, not thousands
    assert len(reads) <= 12, len(reads)
    assert cpu < 0.2, cpu


def test_a_quiet_connection_does_not_wake_the_controller_ten_times_a_second(
    ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """paramiko's reader thread looks round each time its socket read times out (is the
    connection closed, is a keepalive due): 0.1 s apart by default, ten wake-ups a second
    per host for a whole run. Connected, it waits a second."""
    from gpunode.transport._paramiko import paramiko

    wakes: list[float] = []
    real = paramiko.packet.Packetizer._check_keepalive

    def counted(self: paramiko.packet.Packetizer) -> None:
        wakes.append(time.monotonic())
        real(self)

    monkeypatch.setattr(paramiko.packet.Packetizer, "_check_keepalive", counted)
    t = SSHTransport("t1", "127.0.0.1", ssh_server.settings())
    try:
        t.run("true")
        wakes.clear()
        time.sleep(3.0)  # quiet: nothing sent, nothing received
        quiet = len(wakes)
        assert t.run("echo still").stdout == "still\n"  # the connection still serves
    finally:
        t.close()
    assert 1 <= quiet <= 5, quiet  # was 30


def test_a_quiet_command_is_looked_at_once_a_second(
    ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a command says nothing, its thread wakes only to look at the deadline and the
    silence: once a second, not five times (fifty hosts' facts reads, seconds each)."""
    reads = counted_reads(monkeypatch)
    t = SSHTransport("t1", "127.0.0.1", ssh_server.settings())
    try:
        t.run("true")
        reads.clear()
        wall = time.monotonic()
        res = t.run("sleep 3; echo done", timeout=30)
        wall = time.monotonic() - wall
    finally:
        t.close()
    assert res.stdout == "done\n"
    assert 3.0 <= wall < 3.5  # the output is read as it comes, not at the next look
    assert len(reads) <= 8, len(reads)  # three looks, then what came: 6 (was 16)
