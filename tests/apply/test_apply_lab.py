"""gpunode apply on lab hosts: converge, idempotence, --check, a driver upgrade, a killed run.

Every assertion reads the hosts' real state: dpkg's database and files over SSH, and
the hosts' overlay upper directories (everything a host ever wrote) from the outside.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STACK: dict[str, Any] = {
    "driver": {"branch": "550", "flavor": "open", "hold": True},
    "cuda": {"toolkits": ["12.4"], "default": "12.4"},
    "cudnn": "9",
    "nccl": "2.21",
    "cuda_env": True,
    "smoke": ["nvidia-smi"],
}
HOSTS = ("lab-01", "lab-02")


def test_first_apply_converges_second_changes_nothing(lab: Lab, tmp_path: Path) -> None:
    for host in HOSTS:  # whichever lab test ran before, the hosts start empty
        fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    code, evs = apply(lab, inv)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    for host in HOSTS:
        pk = packages(inv, host)
        assert pk["nvidia-open-550"][0].startswith("550.163.01-") and pk["nvidia-open-550"][1]
        assert pk["libnvidia-compute-550"][0].startswith("550.163.01-")
        assert "cuda-toolkit-12-4" in pk
        assert pk["libcudnn9-cuda-12"] == ("9.14.0.64-1", True)
        assert pk["libnccl2"] == ("2.21.5-1+cuda12.4", True)
        assert pk["libnccl-dev"] == ("2.21.5-1+cuda12.4", True)
        assert not {"cuda", "cuda-12-4", "cuda-drivers"} & set(pk)
        assert on_host(inv, host, "readlink -f /usr/local/cuda").strip() == "/usr/local/cuda-12.4"
        profile = on_host(inv, host, "cat /etc/profile.d/gpunode-cuda.sh")
        assert "export CUDA_HOME=/usr/local/cuda\n" in profile
        login = on_host(inv, host, "sh -lc 'echo $CUDA_HOME; echo $PATH'")
        assert login.startswith("/usr/local/cuda\n/usr/local/cuda/bin:")
        assert on_host(inv, host, "cat /etc/ld.so.conf.d/gpunode-cuda.conf").endswith(
            "/usr/local/cuda/lib64\n"
        )
        source = on_host(inv, host, "cat /etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list")
        assert source.startswith("deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] ")
        assert "blacklist nouveau" in on_host(
            inv, host, "cat /etc/modprobe.d/gpunode-blacklist-nouveau.conf"
        )
        # the fresh host had no driver loaded: one reboot, then the module is the new one
        assert len(of(evs, "reboot-started", host)) == 1
        assert on_host(inv, host, "cat /sys/module/nvidia/version").strip() == "550.163.01"
        assert [r["result"]["status"] for r in of(evs, "smoke-result", host)].count("fail") == 0

    before = {h: lab.tree(h) for h in HOSTS}
    start = time.monotonic()
    code, evs = apply(lab, inv, "--no-smoke")
    noop_seconds = time.monotonic() - start
    assert code == 0
    assert of(evs, "change-started") == [] and of(evs, "reboot-started") == []
    assert all(e["changes"] == [] for e in of(evs, "plan-ready"))
    assert {r["host"]: r["changed"] for r in evs[-1]["hosts"]} == dict.fromkeys(HOSTS, 0)
    record = json.loads(Path(evs[-1]["record"]).read_text())
    for host in HOSTS:
        assert record["hosts"][host]["changes"] == []
        assert record["hosts"][host]["round_trips"] == 3  # the lock, the facts, the lock
        assert lab.tree(host) == before[host], "a no-op apply wrote to the host"
    print(f"\nconverged no-op apply on {len(HOSTS)} lab hosts: {noop_seconds:.2f}s")
    plan = lab.gpunode("plan", str(inv), "--detailed-exitcode")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "lab-01: nothing to do" in plan.stdout


def test_mode_and_owner_drift_is_corrected_in_place(lab: Lab, tmp_path: Path) -> None:
    inv = lab.inventory(tmp_path, **STACK)
    code, _ = apply(lab, inv, "--no-smoke")  # converged (already, after the test above)
    assert code == 0
    profile, ldconf = "/etc/profile.d/gpunode-cuda.sh", "/etc/ld.so.conf.d/gpunode-cuda.conf"
    stat = f"stat -c '%a %U:%G %i' {profile} {ldconf}; sha256sum {profile} {ldconf}"
    before = on_host(inv, "lab-01", stat).splitlines()
    on_host(inv, "lab-01", f"sudo chmod 664 {profile} && sudo chown ubuntu:ubuntu {ldconf}")
    code, evs = apply(lab, inv, "--no-smoke")
    assert code == 0
    (planned,) = of(evs, "plan-ready", "lab-01")
    assert [(c["reason"], c["commands"][0]) for c in planned["changes"]] == [
        (f"{profile} mode 0664, want 0644", f"chmod 0644 {profile}"),
        (f"{ldconf} owner ubuntu:ubuntu, want root:root", f"chown root:root {ldconf}"),
    ]
    assert [c["status"] for c in of(evs, "change-finished", "lab-01")] == ["changed"] * 2
    assert of(evs, "plan-ready", "lab-02")[0]["changes"] == []
    # same modes, owners, contents and inodes as before: set in place, not rewritten
    assert on_host(inv, "lab-01", stat).splitlines() == before
    code, evs = apply(lab, inv, "--no-smoke")
    assert code == 0 and of(evs, "change-started") == []


def test_check_writes_nothing(lab: Lab, tmp_path: Path) -> None:
    inv = lab.inventory(tmp_path, **{**STACK, "driver": {"branch": "570", "flavor": "open"}})
    before = {h: lab.tree(h) for h in HOSTS}
    dpkg_before = {h: packages(inv, h) for h in HOSTS}
    plan = lab.gpunode("plan", str(inv), "--detailed-exitcode", "--json")
    assert plan.returncode == 7, plan.stderr
    pending = json.loads(plan.stdout)["hosts"]["lab-02"]["changes"]
    assert pending[-1]["reboot"] and "570.195.03 (open) wanted" in pending[-1]["reason"]
    code, evs = apply(lab, inv, "--check", "--diff")
    assert code == 0
    detailed = lab.gpunode("apply", str(inv), "--check", "--detailed-exitcode", "--json")
    assert detailed.returncode == 7, detailed.stderr
    assert of(evs, "change-started") == [] and of(evs, "reboot-started") == []
    would = of(evs, "change-finished", "lab-01")
    assert [e["status"] for e in would] == ["skipped"] * len(would) and would
    assert any("nvidia-open-570 missing" in e["message"] for e in would)
    for host in HOSTS:
        assert lab.tree(host) == before[host]
        assert packages(inv, host) == dpkg_before[host]


def test_driver_550_to_570_upgrades_reboots_once_converges(lab: Lab, tmp_path: Path) -> None:
    start = lab.inventory(tmp_path / "550", **STACK)  # lab-01 on 550, whatever ran before
    code, evs = apply(lab, start, "--limit", "lab-01", "--no-smoke")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert packages(start, "lab-01")["nvidia-open-550"][0].startswith("550.163.01-")
    inv = lab.inventory(tmp_path, **{**STACK, "driver": {"branch": "570", "flavor": "open"}})
    code, evs = apply(lab, inv, "--limit", "lab-01")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert len(of(evs, "reboot-started", "lab-01")) == 1
    reason = of(evs, "reboot-started", "lab-01")[0]["reason"]
    assert reason == "driver 550.163.01 (open) loaded, 570.195.03 (open) wanted: reboot needed"
    pk = packages(inv, "lab-01")
    assert pk["nvidia-open-570"][0].startswith("570.195.03-") and pk["nvidia-open-570"][1]
    assert "nvidia-open-550" not in pk
    assert on_host(inv, "lab-01", "cat /sys/module/nvidia/version").strip() == "570.195.03"
    code, evs = apply(lab, inv, "--limit", "lab-01", "--no-smoke")
    assert code == 0 and of(evs, "change-started") == []


def test_killed_controller_then_apply_converges(lab: Lab, tmp_path: Path) -> None:
    reset = lab.gpunode("lab", "reset", "lab-02")
    assert reset.returncode == 0, reset.stderr
    inv = lab.inventory(tmp_path, **STACK)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "-l", "lab-02"],
        env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    killed_at = None
    for line in proc.stdout:
        e = json.loads(line)
        # kill while the toolkit's apt-get runs (after the driver went in)
        if e["event"] == "change-started" and e["title"].startswith("cuda_toolkit"):
            time.sleep(0.3)
            os.kill(proc.pid, signal.SIGKILL)
            killed_at = e["title"]
            break
    proc.wait(timeout=30)
    assert killed_at is not None and proc.returncode == -signal.SIGKILL
    code, evs = apply(lab, inv, "-l", "lab-02")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    end = packages(inv, "lab-02")
    # the reference: lab-01 converged by a run nobody interrupted (its driver left alone)
    ref_inv = lab.inventory(tmp_path / "ref", **{**STACK, "driver": None})
    code, evs = apply(lab, ref_inv, "-l", "lab-01", "--no-smoke")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    ref = packages(inv, "lab-01")
    for name in ("cuda-toolkit-12-4", "libcudnn9-cuda-12", "libnccl2", "libnccl-dev"):
        assert end[name] == ref[name]
    assert end["nvidia-open-550"][0].startswith("550.163.01-")
    assert on_host(inv, "lab-02", "dpkg --audit").strip() == ""
    code, evs = apply(lab, inv, "-l", "lab-02", "--no-smoke")
    assert code == 0 and of(evs, "change-started") == []
