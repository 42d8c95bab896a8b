"""A long-lived paramiko connection (a monitor's, for days) forgets the ids of channels
closed long ago, which paramiko itself keeps for ever, and still tells an open old channel
from a new one."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gpunode.transport import ssh
from gpunode.transport.base import CommandResult
from gpunode.transport.ssh import SSHTransport

from .sshd import SshServer


def test_closed_channel_ids_are_forgotten(
    ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ssh, "CHANNELS_REMEMBERED", 8)
    go = f"/tmp/gpunode-channel-ids-{tmp_path.name}"
    t = SSHTransport("t1", "127.0.0.1", ssh_server.settings())
    done: list[CommandResult] = []
    # channel 0 stays open while 60 others open and close
    waiting = f"while [ ! -e {go} ]; do sleep 0.05; done; rm -f {go}; echo late"
    first = threading.Thread(target=lambda: done.append(t.run(waiting, timeout=60)))
    try:
        first.start()
        for i in range(60):
            assert t.run(f"echo {i}").stdout == f"{i}\n"
        conn = t._clients[-1].get_transport()
        assert conn is not None
        seen = sorted(conn.channels_seen)
        assert len(seen) <= 2 * 8 + 1 and seen[-1] == 60
        assert seen[0] == 0  # still open: kept
        t.run(f"touch {go}")
        first.join(30)
        assert [r.stdout for r in done] == ["late\n"]
        assert t.run("echo after").stdout == "after\n"  # the connection still works
    finally:
        t.close()
        first.join(5)
