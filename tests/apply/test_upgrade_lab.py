"""`gpunode upgrade` and `gpunode rollback` on lab hosts under a real Slurm (`lab up --slurm`:
Debian's slurmctld on the controller side, a slurmd per host with its GPUs in gres.conf).

Every assertion reads the real state: dpkg's database and the loaded module on each host,
and what slurmctld says (`scontrol show node/job`, `sinfo -R`, its jobcomp log).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, on_host, packages, start_lab
from tests.conftest import SLOT, slot_net, until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

OLD, NEW = "580.95.05", "580.159.04"
HOSTS = ("lab-01", "lab-02")
STACK: dict[str, Any] = {
    "driver": {"branch": "580", "flavor": "open", "hold": True, "update": "latest"},
    "cuda": None, "cudnn": None, "nccl": None, "cuda_env": False, "smoke": ["nvidia-smi"],
}  # fmt: skip


@pytest.fixture(scope="module")
def slurm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if shutil.which("slurmctld") is None or shutil.which("munged") is None:
        pytest.skip("Slurm is not installed: scripts/setup.sh --dev installs it")
    args = ("--hosts", "2", "--net", str(slot_net(243)), "--port", str(2243 + 1000 * SLOT),
            "--slurm")  # fmt: skip
    yield from start_lab(tmp_path_factory, *args)


def slurm(lab: Lab, *argv: str) -> str:
    env = {**lab.env, "SLURM_CONF": str(lab.dir / "slurm" / "slurm.conf")}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, f"{argv}: {out.stderr}"
    return out.stdout


def node(lab: Lab, name: str) -> dict[str, str]:
    from gpunode.scheduler.slurm import parse_show

    return parse_show(slurm(lab, "scontrol", "show", "node", "-o", name))


def idle(lab: Lab, name: str) -> bool:
    """IDLE, not drained, responding."""
    return node(lab, name)["State"] == "IDLE"


def at(lab: Lab, inv: Path, release: str) -> None:
    for h in HOSTS:
        assert packages(inv, h)["nvidia-open-580"][0] == f"{release}-1", h
        assert on_host(inv, h, "cat /sys/module/nvidia/version").strip() == release, h


def start_at_old(lab: Lab, tmp: Path) -> Path:
    """Both hosts at the older release, loaded, their nodes idle; the inventory."""
    inv = inventory(lab, tmp)
    for h in HOSTS:
        if "DRAIN" in node(lab, h)["State"]:  # left so by an earlier test's failing canary
            slurm(lab, "scontrol", "update", f"NodeName={h}", "State=RESUME")
        if packages(inv, h).get("nvidia-open-580", ("",))[0] != f"{OLD}-1":
            out = lab.gpunode("lab", "install", h, f"nvidia-open-580={OLD}-1", "--reboot")
            assert out.returncode == 0, out.stderr
    for h in HOSTS:
        on_host(inv, h, "sudo apt-mark unhold nvidia-open-580 >/dev/null; true")
        until(lambda h=h: idle(lab, h), 60, f"{h}'s node idle")
    at(lab, inv, OLD)
    return inv


def inventory(lab: Lab, tmp: Path, controller: str | None = None) -> Path:
    """The lab's inventory with STACK; `controller`: scontrol runs on that lab host (over
    gpunode's connection, with sudo) with the hosts' own slurm.conf, not here."""
    path = lab.inventory(tmp, **STACK)
    if controller is not None:
        from ruamel.yaml import YAML

        yaml = YAML()
        doc = yaml.load(path.read_text())
        doc["defaults"]["slurm"] = {"controller": controller, "conf": "/etc/slurm/slurm.conf"}
        with path.open("w") as fh:
            yaml.dump(doc, fh)
    return path


def upgrade(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return lab.gpunode(*args, "--yes", timeout=420)


def record(lab: Lab, out: str) -> dict[str, Any]:
    path = [ln for ln in out.splitlines() if ln.startswith("rollout record: ")][-1]
    data: dict[str, Any] = json.loads(Path(path.removeprefix("rollout record: ")).read_text())
    return data


def slurm_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()


def test_a_running_job_is_waited_for_then_every_host_upgrades_and_rollback_returns_them(
    slurm_lab: Lab, tmp_path: Path
) -> None:
    inv = start_at_old(slurm_lab, tmp_path)
    job = slurm(slurm_lab, "sbatch", "--parsable", "-o", "/dev/null", "-w", "lab-02",
                "--wrap", "sleep 20").strip()  # fmt: skip
    until(lambda: "RUNNING" in slurm(slurm_lab, "scontrol", "show", "job", job), 30, "job runs")

    # one wave of both hosts (the canary has its own test): lab-02's drain meets the job
    out = upgrade(slurm_lab, "upgrade", str(inv), "--canary", "0", "--wave-size", "100%")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert f"lab-02: waiting for job {job}" in out.stdout
    shown = slurm(slurm_lab, "scontrol", "show", "job", "-o", job)
    assert "JobState=COMPLETED" in shown and "ExitCode=0:0" in shown, shown
    jobcomp = (slurm_lab.dir / "slurm" / "jobcomp.log").read_text()
    assert f"JobId={job} " in jobcomp and "JobState=COMPLETED" in jobcomp
    # lab-02's apply began only once the job had ended
    rec = record(slurm_lab, out.stdout)
    wave = rec["waves"][0]
    assert wave["hosts"] == ["lab-01", "lab-02"] and wave["status"] == "verified"
    runs = Path(out.stdout.split("rollout record: ")[-1].strip()).parent
    applied = json.loads((runs / f"{wave['runs'][0]}.json").read_text())["started"]
    ended = slurm_time(shown.split("EndTime=")[1].split()[0])
    assert applied >= ended, (applied, ended)

    at(slurm_lab, inv, NEW)
    for h in HOSTS:
        until(lambda h=h: idle(slurm_lab, h), 30, f"{h} back IDLE")
        n = node(slurm_lab, h)
        assert n["Gres"] == "gpu:2"
        assert slurm_time(n["SlurmdStartTime"]) >= rec["started"] - 1  # restarted by the run
    assert rec["hosts"]["lab-02"]["before"]["driver"] == OLD

    back = upgrade(slurm_lab, "rollback", rec["id"])
    assert back.returncode == 0, back.stdout[-3000:] + back.stderr[-2000:]
    at(slurm_lab, inv, OLD)
    for h in HOSTS:
        until(lambda h=h: idle(slurm_lab, h), 30, f"{h} back IDLE after the rollback")


def test_a_canary_whose_smoke_test_fails_stops_the_rollout_drained_with_its_reason(
    slurm_lab: Lab, tmp_path: Path
) -> None:
    inv = start_at_old(slurm_lab, tmp_path)
    remote = inventory(slurm_lab, tmp_path / "remote", controller="lab-02")
    assert slurm_lab.gpunode("lab", "fault", "lab-01", "gpu-lost").returncode == 0
    try:  # scontrol on lab-02, the one host this rollout must not touch
        out = upgrade(slurm_lab, "upgrade", str(remote))
    finally:
        slurm_lab.gpunode("lab", "fault", "lab-01", "gpu-lost", "--off")
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-2000:]
    assert "the canary failed on 1 of 1 host(s)" in out.stderr
    reasons = slurm(slurm_lab, "sinfo", "-R", "-h", "-o", "%N|%E")
    assert reasons.startswith("lab-01|gpunode: failed: apply failed"), reasons
    assert "DRAIN" in node(slurm_lab, "lab-01")["State"]
    # the other host: untouched, its node never drained
    assert packages(inv, "lab-02")["nvidia-open-580"][0] == f"{OLD}-1"
    assert on_host(inv, "lab-02", "cat /sys/module/nvidia/version").strip() == OLD
    assert idle(slurm_lab, "lab-02")
    assert record(slurm_lab, out.stdout)["hosts"]["lab-02"]["phase"] == "untouched"
    assert os.path.exists(slurm_lab.dir / "slurm" / "slurm.conf")
