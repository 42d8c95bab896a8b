"""Facts over real SSH, the host pool, and `gpunode facts` against real sshd hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gpunode.events import Bus, Event, FactsGathered, HostConnected, HostUnreachable
from gpunode.facts.gather import gather, gather_all
from gpunode.inventory import loads

from .conftest import MakeTransport
from .sshd import NOPASS_USER, SshServer, free_port
from .test_ssh import silent_port  # noqa: F401  (fixture)


def test_facts_over_ssh_match_the_host(
    ssh_server: SshServer, make_transport: MakeTransport
) -> None:
    t = make_transport("t1", "127.0.0.1", ssh_server.settings())
    try:
        t.connect()
        before = t.channels_opened
        sessions = _sessions(ssh_server)
        f = gather(t, files=["/etc/hostname"])
    finally:
        t.close()
    assert t.channels_opened - before == 1  # one round trip
    assert _sessions(ssh_server) - sessions == 1  # sshd's own log: one command
    assert f.errors == []
    assert f.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert f.kernel == os.uname().release
    import hashlib

    assert (
        f.files["/etc/hostname"] == hashlib.sha256(Path("/etc/hostname").read_bytes()).hexdigest()
    )
    print(f"facts round trip over loopback ssh: {f.gather_seconds * 1000:.0f} ms")


def _sessions(server: SshServer) -> int:
    """Commands sshd started (its DEBUG1 log)."""
    return server.log.read_text(errors="replace").count("req exec")


def _inventory(ssh_server: SshServer, extra: str) -> str:
    return f"""
defaults:
  ssh:
    user: {NOPASS_USER}
    port: {ssh_server.port}
    identity_file: {ssh_server.client_key}
    known_hosts_file: {ssh_server.known_hosts}
    config_file: null
    connect_timeout: 2
hosts:
  good:
    address: 127.0.0.1
  me:
    connection: local
{extra}
"""


def test_pool_isolates_unreachable_hosts(ssh_server: SshServer, silent_port: int) -> None:  # noqa: F811
    inv = loads(
        _inventory(
            ssh_server,
            f"""
  stalled:
    address: 127.0.0.1
    ssh: {{port: {silent_port}}}
  refused:
    address: 127.0.0.1
    ssh: {{port: {free_port()}}}
""",
        )
    )
    events: list[Event] = []
    bus = Bus()
    bus.subscribe(events.append)
    start = time.monotonic()
    out = gather_all(inv.select(None), bus=bus, forks=4)
    took = time.monotonic() - start
    assert {n: o.status for n, o in out.items()} == {
        "good": "ok",
        "me": "ok",
        "stalled": "unreachable",
        "refused": "unreachable",
    }
    assert took < 6, took  # the stalled host cost its 2 s connect timeout, in parallel
    assert "banner" in out["stalled"].error and "refused" in out["refused"].error
    good = out["good"].value
    assert good is not None and good.boot_id
    kinds = {(type(e).__name__, e.host) for e in events}
    assert ("HostConnected", "good") in kinds and ("FactsGathered", "me") in kinds
    assert ("HostUnreachable", "stalled") in kinds
    assert all(not isinstance(e, FactsGathered) for e in events if e.host == "stalled")
    assert any(isinstance(e, HostConnected) for e in events)
    assert any(isinstance(e, HostUnreachable) for e in events)


def test_cli_facts_json_and_exit_code(ssh_server: SshServer, tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        _inventory(
            ssh_server,
            f"""
  gone:
    address: 127.0.0.1
    ssh: {{port: {free_port()}}}
""",
        )
    )
    res = subprocess.run([sys.executable, "-m", "gpunode", "facts", str(inv), "--json"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 3, res.stderr
    doc = json.loads(res.stdout)["hosts"]
    assert doc["good"]["status"] == "ok" and doc["gone"]["status"] == "unreachable"
    assert doc["good"]["facts"]["boot_id"] == doc["me"]["facts"]["boot_id"]
    res = subprocess.run([sys.executable, "-m", "gpunode", "facts", str(inv), "-l", "good"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("good: gathered in") and "boot id" in res.stdout
