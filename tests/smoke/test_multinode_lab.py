"""`gpunode smoke --only nccl-multinode` on lab hosts: a real torchrun (CPU torch, gloo) per
host, meeting the others at a rendezvous on their loopback addresses, behind the lab's
stand-in front that records its argv and environment and prints NCCL's network lines."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gpunode.views.schemas import validate
from gpunode_lab import torchrun_standin
from tests.conftest import Lab

REAL_TORCHRUN = str(Path(sys.executable).parent / "torchrun")
TIMEOUT = 90  # a bound: torch imports take seconds each on a busy machine


def _inventory(
    lab: Lab, tmp: Path, hosts: list[str], transport: str = "paramiko", **nccl: Any
) -> Path:
    yaml = YAML()
    doc = yaml.load(lab.inventory_text)
    doc["defaults"]["ssh"]["transport"] = transport
    doc["defaults"]["nccl"] = {
        "bin": torchrun_standin.BIN,
        "backend": "gloo",
        "nproc_per_node": 1,
        "sizes_mib": [1, 4],
        "timeout": TIMEOUT,
        "interface": "lo",
        **nccl,
    }
    group = doc["groups"]["lab"]["hosts"]
    for name in list(group):
        if name not in hosts:
            del group[name]
    path = tmp / "inventory.yaml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    # Per-host environment from host_vars/, as two processes of one machine would need it.
    (tmp / "host_vars").mkdir(exist_ok=True)
    for i, name in enumerate(hosts):
        (tmp / "host_vars" / f"{name}.yaml").write_text(
            f'nccl:\n  local_addr: {lab.addresses[name]}\n  env:\n    CUDA_VISIBLE_DEVICES: "{i}"\n'
        )
    return path


def _install(lab: Lab, hosts: list[str], fabric: str = "Socket") -> None:
    for host in hosts:
        lab.sudo(host, torchrun_standin.install_command(REAL_TORCHRUN, fabric))


def _smoke(inv: Path, *args: str) -> tuple[int, dict[str, Any], float]:
    start = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "gpunode", "smoke", str(inv), "--only", "nccl-multinode", "--json",
         *args],
        capture_output=True, text=True, timeout=TIMEOUT + 120,
    )  # fmt: skip
    assert res.stdout.strip(), res.stderr
    validate("smoke", res.stdout)
    return res.returncode, json.loads(res.stdout), time.monotonic() - start


def _results(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for host in doc["hosts"]:
        (record,) = [r for r in host["results"] if r["name"] == "nccl-multinode"]
        out[host["host"]] = record
    return out


def _no_torchrun(lab: Lab, host: str) -> bool:
    procs = lab.run(host, "ps -eo args=").stdout
    return not [line for line in procs.splitlines() if "torchrun" in line]


@pytest.fixture
def three(lab_hosts: Lab) -> list[str]:
    if len(lab_hosts.names) < 3:
        pytest.skip("needs 3 lab hosts")
    if not Path(REAL_TORCHRUN).exists():
        pytest.skip("no torchrun beside this python")
    return lab_hosts.names[:3]


def test_three_hosts_meet_and_report_bandwidth_and_transport(
    lab_hosts: Lab, three: list[str], tmp_path: Path
) -> None:
    _install(lab_hosts, three)
    inv = _inventory(lab_hosts, tmp_path, three, expect={"transport": "socket"})
    code, doc, _ = _smoke(inv)
    results = _results(doc)
    assert code == 0, results
    ports = set()
    for rank, host in enumerate(three):
        r = results[host]
        assert r["status"] == "pass", r
        assert r["details"]["world"] == 3
        assert r["details"]["transports"] == {"socket": 2}
        assert r["details"]["net_devices"] == ["Socket: [0]lo:127.0.0.1<0>"]
        assert [row["bytes"] for row in r["details"]["inter"]] == [1 << 20, 4 << 20]
        assert r["value"] == r["details"]["inter"][-1]["busbw_gbps"] > 0
        # What the host's torchrun was really started with, as the stand-in recorded it.
        argv = lab_hosts.run(host, f"cat {torchrun_standin.RECORD}.argv").stdout.splitlines()
        assert "--nnodes=3" in argv and f"--node-rank={rank}" in argv
        # every host meets the store on its own loopback: the first host's own, the others'
        # a port gpunode forwards to it, each its own (lab hosts share one loopback)
        port = r["details"]["endpoint"].split()[0]
        assert port.startswith("127.0.0.1:") and f"--rdzv-endpoint={port}" in argv
        assert "--rdzv-backend=c10d" in argv and "--rdzv-conf=is_host=0" in argv
        assert not [a for a in argv if a.startswith("--rdzv-id")]
        ports.add(port)
        env = lab_hosts.run(host, f"cat {torchrun_standin.RECORD}.env").stdout.splitlines()
        assert f"CUDA_VISIBLE_DEVICES={rank}" in env and "NCCL_SOCKET_IFNAME=lo" in env
        assert "GLOO_SOCKET_IFNAME=lo" in env
        assert "NCCL_DEBUG=INFO" in env
    ids = {results[h]["details"]["run_id"] for h in three}
    assert len(ids) == 1 and len(ports) == 3
    assert all(_no_torchrun(lab_hosts, h) for h in three)


def test_sockets_where_ib_was_expected_fail(
    lab_hosts: Lab, three: list[str], tmp_path: Path
) -> None:
    hosts = three[:2]
    _install(lab_hosts, hosts)
    inv = _inventory(lab_hosts, tmp_path, hosts, expect={"transport": "ib"})
    code, doc, _ = _smoke(inv)
    assert code == 2
    for r in _results(doc).values():
        assert r["status"] == "fail"
        assert "NCCL used socket where ib was expected" in r["reason"], r
        assert "NCCL_IB_HCA" in r["reason"]
    # The same hosts with an IB fabric pass: the expectation is what failed, not the run.
    _install(lab_hosts, hosts, fabric="IB")
    code, doc, _ = _smoke(inv)
    assert code == 0, _results(doc)
    assert all(r["details"]["transports"] == {"ib": 2} for r in _results(doc).values())


def test_without_the_first_hosts_store_every_host_fails_cleanly_and_at_once(
    lab_hosts: Lab, three: list[str], tmp_path: Path
) -> None:
    hosts = three[:2]
    _install(lab_hosts, hosts)
    inv = _inventory(lab_hosts, tmp_path, hosts, timeout=60)
    # The first host's torchrun has no python beside it to hold the store.
    lab_hosts.sudo(hosts[0], f"rm -f {torchrun_standin.BIN}/python")
    code, doc, seconds = _smoke(inv)
    assert code == 2
    assert seconds < 60  # nobody waits for the timeout: the store never opened
    results = _results(doc)
    assert "no python beside torchrun" in results[hosts[0]]["reason"], results
    assert results[hosts[1]]["reason"].startswith("no rendezvous: torchrun on lab-"), results
    assert "ended before its store started" in results[hosts[1]]["reason"]
    for host in hosts:
        assert results[host]["status"] == "fail"
        assert _no_torchrun(lab_hosts, host), lab_hosts.run(host, "ps -eo args=").stdout
