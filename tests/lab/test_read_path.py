"""The read path on lab hosts, as a user runs it: `gpunode facts` and `gpunode plan`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab


def gpunode(lab, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = {**os.environ, "GPUNODE_LAB_DIR": str(lab.state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "gpunode", *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def inventory(lab, tmp_path: Path, **ssh: object) -> Path:  # type: ignore[no-untyped-def]
    """The lab's own inventory, with a short connect timeout (and any other ssh settings)."""
    text = lab.inventory_text.replace(
        "    host_key_policy: strict\n",
        "    host_key_policy: strict\n    connect_timeout: 2\n"
        + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in ssh.items()),
    )
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    return path


def test_facts_report_what_is_really_on_the_hosts(lab_hosts, lab_fresh_host, tmp_path):  # type: ignore[no-untyped-def]
    host = lab_fresh_host
    repo = f"{lab_hosts.config['repo_url']}/ubuntu2404/x86_64"
    lab_hosts.sudo(
        host,
        f"curl -fsS -o /tmp/k.deb {repo}/cuda-keyring_1.1-1_all.deb"
        " && dpkg -i /tmp/k.deb >/dev/null"
        " && apt-get -qq update && apt-get -qq install -y libnccl2=2.28.3-1+cuda13.0 >/dev/null"
        " && apt-mark hold libnccl2 >/dev/null",
    )
    inv = inventory(lab_hosts, tmp_path)
    out = gpunode(lab_hosts, "facts", str(inv), "--json", "--limit", host)
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)["hosts"][host]["facts"]
    # compared with what the host itself says, read separately
    dpkg = lab_hosts.run(host, "dpkg-query -W -f '${Package} ${Version} ${Status}\\n' 'libnccl*'")
    listed = {line.split()[0]: line.split() for line in dpkg.stdout.splitlines()}
    assert facts["packages"]["libnccl2"]["version"] == listed["libnccl2"][1] == "2.28.3-1+cuda13.0"
    assert facts["packages"]["libnccl2"]["status"].startswith("hold")
    boot_id = lab_hosts.run(host, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
    assert facts["boot_id"] == boot_id
    assert (facts["os"]["id"], facts["os"]["version_id"]) == ("ubuntu", "24.04")
    assert [g["device_id"] for g in facts["pci_gpus"]] == ["2335"] * lab_hosts.config.get("gpus", 2)
    # a fresh host has no driver: nvidia-smi is absent, no module is loaded
    assert facts["module"]["loaded"] is False and facts["smi"]["ok"] is False
    assert "nvidia-open-580" not in facts["packages"]


def test_plan_exit_codes_and_a_stalled_host(lab_hosts, lab_fresh_host, tmp_path):  # type: ignore[no-untyped-def]
    inv = inventory(lab_hosts, tmp_path)
    stalled = lab_fresh_host
    others = [n for n in lab_hosts.names if n != stalled]
    lab_hosts.fault(stalled, "stall")
    try:
        t0 = time.monotonic()
        out = gpunode(lab_hosts, "plan", str(inv), "--json")
        took = time.monotonic() - t0
    finally:
        lab_hosts.fault(stalled, "stall", off=True)
    # the stalled host is reported unreachable within the timeout; the others are planned
    # (plan's exit codes: 0 nothing to do, 2 failed, 3 unreachable, 4 refused, 7 pending)
    assert out.returncode == 3, out.stderr
    assert took < 30
    doc = json.loads(out.stdout)
    hosts = doc["hosts"]
    assert hosts[stalled]["status"] == "unreachable"
    assert "banner" in hosts[stalled]["error"] or "timed out" in hosts[stalled]["error"]
    for name in others:
        assert hosts[name]["status"] == "ok", hosts[name]
    # a fresh host has changes pending: --detailed-exitcode says 7
    lab_hosts.wait_up(stalled)
    out = gpunode(lab_hosts, "plan", str(inv), "--limit", stalled, "--detailed-exitcode")
    assert out.returncode == 7, out.stdout + out.stderr
    assert "cuda-toolkit-13-0 missing" in out.stdout


def test_an_unknown_host_key_is_refused_under_strict(lab_hosts, tmp_path):  # type: ignore[no-untyped-def]
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    inv = inventory(lab_hosts, tmp_path)
    inv.write_text(inv.read_text().replace(str(lab_hosts.known_hosts), str(empty)))
    host = lab_hosts.names[0]
    out = gpunode(lab_hosts, "facts", str(inv), "--limit", host)
    assert out.returncode == 3
    text = out.stdout + out.stderr
    assert "SHA256:" in text and lab_hosts.addresses[host] in text
    assert empty.read_text() == ""  # nothing was recorded
    # accept-new records the first key, then the same key is accepted
    inv.write_text(
        inv.read_text().replace("host_key_policy: strict", "host_key_policy: accept-new")
    )
    assert gpunode(lab_hosts, "facts", str(inv), "--limit", host).returncode == 0
    assert lab_hosts.addresses[host] in empty.read_text()
    assert gpunode(lab_hosts, "facts", str(inv), "--limit", host).returncode == 0
