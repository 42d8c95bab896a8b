"""A command's output is kept as the last OUTPUT_RING_BYTES of each stream; the caller's
callback still sees every byte, and a parser that needs the whole output refuses a cut one.

Over every transport: local (a child process), paramiko and the system ssh client (the
tests' own sshd)."""

from __future__ import annotations

import pytest

from gpunode.transport.base import CommandResult, OutputCutError, TransportError
from gpunode.transport.local import LocalTransport
from gpunode.transport.ring import OUTPUT_RING_BYTES, OutputRing

from .conftest import MakeTransport, Remote
from .sshd import NOPASS_USER, SshServer

CAP = OUTPUT_RING_BYTES
SPEW = CAP + 3 * (1 << 20)  # 3 MiB more than is kept
ERR = CAP + (1 << 20)
# numbered lines: SPEW bytes of them on stdout, ERR on stderr
COMMAND = f"seq -w 1 99999999 | head -c {SPEW}; seq -w 1 99999999 | head -c {ERR} >&2; exit 7"


def test_ring_keeps_the_end_and_counts_what_it_dropped() -> None:
    ring = OutputRing(cap=100)
    for i in range(50):
        ring.add(f"line {i:03d}\n")  # 9 bytes each
    assert len(ring.text().encode()) == 100 and ring.cut == 50 * 9 - 100
    assert ring.text().endswith("line 049\n")
    wide = OutputRing(cap=10)
    wide.add("é" * 20)  # 2 bytes each: the cut falls on a character boundary
    assert wide.text() == "é" * 5 and wide.cut == 30


def check_spew(res: CommandResult, seen: dict[str, int]) -> None:
    assert res.exit_code == 7
    assert seen == {"stdout": SPEW, "stderr": ERR}  # the callback saw every byte
    assert len(res.stdout.encode()) == CAP and res.stdout_cut == SPEW - CAP
    assert len(res.stderr.encode()) == CAP and res.stderr_cut == ERR - CAP
    # the kept part is the end of the stream, in order
    lines = res.stdout.split("\n")[1:-1]
    assert [int(n) for n in lines] == list(range(int(lines[0]), int(lines[0]) + len(lines)))
    assert int(lines[-1]) == SPEW // 9
    with pytest.raises(OutputCutError, match="bytes dropped from its start"):
        res.whole_stdout  # noqa: B018


def spew(t: LocalTransport | Remote) -> tuple[CommandResult, dict[str, int]]:
    seen = {"stdout": 0, "stderr": 0}

    def count(stream: str, text: str) -> None:
        seen[stream] += len(text.encode())

    return t.run(COMMAND, on_output=count, timeout=120), seen


def test_local_command_spewing_output() -> None:
    check_spew(*spew(LocalTransport()))


def test_ssh_command_spewing_output(ssh_server: SshServer, make_transport: MakeTransport) -> None:
    check_spew(*spew(make_transport("t1", "127.0.0.1", ssh_server.settings())))


def test_a_cut_file_is_refused_not_read_short(
    ssh_server: SshServer, make_transport: MakeTransport, tmp_path: object
) -> None:
    """get() goes through base64 over a command on the openssh transport and with sudo:
    a file bigger than the ring is an error, never a short read."""
    t = make_transport("t1", "127.0.0.1", ssh_server.settings())
    # the slot's own user in the name: /tmp is shared by every test session on this machine
    path = f"/tmp/gpunode-ring-test-{NOPASS_USER}-{make_transport.kind}"
    assert t.run(f"head -c {CAP} /dev/zero > {path}").ok
    try:
        if make_transport.kind == "openssh":
            with pytest.raises(TransportError, match="dropped from its start"):
                t.get(path)
        else:
            assert len(t.get(path)) == CAP  # sftp: no command output in between
    finally:
        t.run(f"rm -f {path}")


def test_facts_refuse_a_cut_output() -> None:
    from gpunode.facts.gather import gather

    class Cut:
        name = "cut"

        def run(self, command: object, **_: object) -> CommandResult:
            return CommandResult("facts", 0, "### os\n...\n### end\n", "", 0.1, stdout_cut=9)

    with pytest.raises(OutputCutError):
        gather(Cut())  # type: ignore[arg-type]
