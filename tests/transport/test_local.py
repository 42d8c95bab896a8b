"""LocalTransport: the same behaviours as SSH, on the controller."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpunode.transport.base import CommandTimeoutError
from gpunode.transport.local import LocalTransport

from .test_ssh import HOSTILE


def test_exit_codes_streaming_stdin_env() -> None:
    t = LocalTransport()
    chunks: list[tuple[str, float]] = []
    start = time.monotonic()
    res = t.run("echo one; sleep 0.5; echo two >&2; exit 5",
                on_output=lambda s, x: chunks.append((x, time.monotonic() - start)))  # fmt: skip
    assert (res.exit_code, res.stdout, res.stderr) == (5, "one\n", "two\n")
    assert chunks[1][1] - chunks[0][1] > 0.3
    res = t.run('cat; printf %s "$V"', stdin=b"in\n", env={"V": "`id`"})
    assert res.stdout == "in\n`id`"


def test_hostile_values() -> None:
    t = LocalTransport()
    for value in HOSTILE:
        assert t.run(["printf", "%s", value]).stdout == value
        assert t.run(["printf", "%s", value], sudo=True).stdout == value


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    marker, pidfile = tmp_path / "late", tmp_path / "child.pid"
    child = f"echo $$ > {pidfile}.new && mv {pidfile}.new {pidfile}; sleep 8; touch {marker}"
    # the command waits for its child's pid before its own sleep: on a loaded machine the
    # timeout could otherwise fire before the child has even started
    ready = f"while [ ! -e {pidfile} ]; do sleep 0.01; done"
    start = time.monotonic()
    with pytest.raises(CommandTimeoutError):
        LocalTransport().run(f"sh -c '{child}' & {ready}; sleep 30", timeout=2)
    assert time.monotonic() - start < 8  # the timeout's, not the 30 s sleep or the child's 8
    pid = int(pidfile.read_text())
    # the background child died with its group: gone before it could touch the marker
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid) and not marker.exists()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that may never reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(os.geteuid() != 0, reason="root runs sudo'ed commands directly")
def test_sudo_as_root_runs_directly() -> None:
    res = LocalTransport().run("id -u; ps -o args= -p $PPID", sudo=True)
    assert res.stdout.split("\n")[0] == "0" and "sudo" not in res.stdout


def test_get(tmp_path: Path) -> None:
    p = tmp_path / "f.conf"
    p.write_bytes(b"new\x00data")
    p.chmod(0o600)
    assert LocalTransport().get(str(p)) == b"new\x00data"
    assert LocalTransport().get(str(p), sudo=True) == b"new\x00data"


def test_become_none_never_asks_the_transport_for_sudo() -> None:
    from gpunode.transport.nobecome import NoBecome

    asked: list[bool] = []

    class Recording(LocalTransport):
        def run(self, command, *, sudo=False, **kw):  # type: ignore[no-untyped-def]
            asked.append(sudo)
            return super().run(command, **kw)

    t = NoBecome(Recording())
    assert t.run("id -u", sudo=True).ok
    assert asked == [False]
