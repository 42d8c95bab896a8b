"""The host read's command: its output held on the host and written in one piece."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from gpunode.execute.readhost import MARK, held, read_host
from gpunode.roles.ops import Probe
from gpunode.transport.local import LocalTransport


def sh(script: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", script], capture_output=True, check=False, timeout=30)


@pytest.mark.parametrize("code", [0, 3])
def test_held_output_is_every_byte_with_its_exit_status(code: int) -> None:
    command = (
        f"printf 'a\\n\\n  b  \\n'; printf 'said\\n' >&2; printf 'c\\n\\n\\n'\n( exit {code} )"
    )
    plain, kept = sh(command), sh(held(command))
    assert kept.stdout == plain.stdout == b"a\n\n  b  \nc\n\n\n"
    assert kept.stderr == b"said\n"
    assert kept.returncode == plain.returncode == code


def test_held_output_arrives_in_one_write() -> None:
    """The point of holding it: a command writing line by line, slowly, is read as one
    piece (sshd sends what each read of the pipe gets as one packet)."""
    command = "for i in 1 2 3 4 5; do echo line $i; sleep 0.05; done"
    with subprocess.Popen(["sh", "-c", held(command)], stdout=subprocess.PIPE) as p:
        assert p.stdout is not None
        first = os.read(p.stdout.fileno(), 65536)
        rest = p.stdout.read()
    assert first == b"".join(f"line {i}\n".encode() for i in range(1, 6))
    assert rest == b""


def test_a_slow_held_read_still_speaks_and_ends_when_its_command_does() -> None:
    """Held, a read longer than the beat prints a newline on stderr every beat, as its
    streamed lines kept the host from reading as silent (ssh.inactivity_timeout); the
    ticker holds none of the pipes, so the read ends with its command."""
    command = "echo a; sleep 4.2; echo b; ( exit 4 )"
    start = time.monotonic()
    slow = sh(held(command, beat=2))
    took = time.monotonic() - start
    assert (slow.stdout, slow.returncode) == (b"a\nb\n", 4)
    # a beat about every 2 s (fewer when a loaded machine wakes the ticker late)
    assert slow.stderr.strip(b"\n") == b"" and 1 <= len(slow.stderr) <= 3
    # no sleep of the ticker's left holding stderr open, which would add up to a beat
    assert took < 4.2 + 1.5  # a sleep held to its end (at 6 s) would be caught
    fast = sh(held("echo fast", beat=5))
    assert (fast.stdout, fast.stderr, fast.returncode) == (b"fast\n", b"", 0)


def test_a_read_with_probes_through_the_held_output() -> None:
    probes = [Probe("yes", "true"), Probe("no", "false"), Probe("quiet", "echo noise; exit 0")]
    facts, found = read_host(LocalTransport(), files=["/etc/hostname"], probes=probes)
    assert found == {"yes": True, "no": False, "quiet": True}
    assert "/etc/hostname" in facts.files
    assert MARK not in str(facts.files)
