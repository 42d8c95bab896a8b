"""A new driver loaded by reloading the kernel module instead of rebooting, through the CLI on
lab hosts (stack.driver.reload): an idle host reloads (boot id unchanged, the new module
loaded, the persistence daemon running again), nouveau or a process holding the GPUs makes
it a reboot and the plan says why, a refused unload reboots instead, and a driver/library
version mismatch left by an unattended upgrade is found and fixed. Assertions read the hosts:
/sys/module/nvidia/version, the persistence daemon, nvidia-smi, the lab's boot id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_disrupt_lab import with_settings
from test_faults_hosts import finished, inventory, run

from gpunode.exitcodes import ExitCode
from tests.apply.labhelpers import Lab, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

OLD, NEW = "550.127.05", "550.163.01"
IDLE = "nothing holds the GPUs"
LOG = "/var/tmp/gpunode-hooks.log"
HOOKS = {
    "before_disrupt": f"echo before $(cat /proc/sys/kernel/random/boot_id) >> {LOG}",
    "after_disrupt": f"echo after $(cat /proc/sys/kernel/random/boot_id) >> {LOG}",
}
# A job that holds /dev/nvidia0 open under the name NAME (a file on a private /dev, as the
# lab's gpu-busy job does), started after the facts were read.
HOLDER = (
    "cp /bin/sleep /run/{name} && setsid unshare -m sh -c 'mount -t tmpfs holder /dev"
    " && : > /dev/nvidia0 && exec /run/{name} 600 3</dev/nvidia0'"
    " </dev/null >/dev/null 2>&1 & sleep 1"
)


def driver(version: str | None = None, **more: Any) -> dict[str, Any]:
    pin = {"version": version} if version else {"branch": "550"}
    return {"driver": {**pin, "flavor": "open", "hold": False, "reload": True, **more}}


def inv_in(lab: Lab, folder: Path, **stack: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return inventory(lab, folder, {}, {}, **stack)


def loaded(inv: Path, host: str) -> str:
    return on_host(inv, host, "cat /sys/module/nvidia/version 2>/dev/null || true").strip()


def persistenced(inv: Path, host: str) -> str:
    """The persistence daemon's pid, "" when it does not run."""
    return on_host(
        inv, host, "systemctl is-active --quiet nvidia-persistenced"
        " && cat /run/nvidia-persistenced/nvidia-persistenced.pid || true",
    ).strip()  # fmt: skip


def plan(lab: Lab, inv: Path, host: str, *args: str) -> str:
    res = lab.gpunode("plan", str(inv), "-l", host, *args)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def installed(lab: Lab, tmp: Path, host: str) -> Path:
    """A fresh host with the older release installed (as an admin would, not held) and
    loaded at boot; the inventory that wants the newer one."""
    fresh(lab, host)
    res = lab.gpunode(
        "lab", "install", host, f"nvidia-open-550={OLD}-1",
        f"libnvidia-compute-550={OLD}-0ubuntu1", "--reboot",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    inv = inv_in(lab, tmp, **driver(NEW))
    assert loaded(inv, host) == OLD and persistenced(inv, host)
    return inv


def test_a_fresh_host_loads_the_module_without_a_reboot(lab: Lab, tmp_path: Path) -> None:
    host = "lab-01"
    fresh(lab, host)
    boot = lab.boot_id(host)
    inv = inv_in(lab, tmp_path, **driver(NEW))
    why = f"driver none loaded, {NEW} (open) wanted: load the nvidia module: {IDLE}"
    assert why in plan(lab, inv, host)
    code, evs, _ = run(lab, inv, "-l", host, "--no-smoke")
    assert code == ExitCode.OK, finished(evs)
    assert of(evs, "reboot-started") == [] and lab.boot_id(host) == boot
    assert loaded(inv, host) == NEW and persistenced(inv, host)


def test_an_idle_host_reloads_the_module_with_hooks_and_no_reboot(lab: Lab, tmp_path: Path) -> None:
    host = "lab-01"
    inv = with_settings(installed(lab, tmp_path, host), hooks=HOOKS)
    boot, daemon = lab.boot_id(host), persistenced(inv, host)
    text = plan(lab, inv, host)
    why = f"driver {OLD} (open) loaded, {NEW} (open) wanted: reload the nvidia module: {IDLE}"
    assert why in text and "modprobe -r $was" in text, text
    # --no-reboot stops reboots, not a reload
    code, evs, _ = run(lab, inv, "-l", host, "--no-smoke", "--no-reboot")
    assert code == ExitCode.OK, finished(evs)
    assert of(evs, "reboot-started") == [] and of(evs, "reboot-pending") == []
    assert lab.boot_id(host) == boot
    assert loaded(inv, host) == NEW
    assert packages(inv, host)["libnvidia-compute-550"][0] == f"{NEW}-0ubuntu1"
    again = persistenced(inv, host)
    assert again and again != daemon  # stopped for the unload, started after the load
    assert on_host(inv, host, f"cat {LOG}").splitlines() == [f"before {boot}", f"after {boot}"]
    code, evs, _ = run(lab, inv, "-l", host, "--no-smoke")
    assert code == ExitCode.OK and of(evs, "change-started") == [], finished(evs)


def test_nouveau_makes_it_a_reboot_and_the_plan_says_why(lab: Lab, tmp_path: Path) -> None:
    host = "lab-02"
    fresh(lab, host)
    res = lab.gpunode("lab", "fault", host, "nouveau")
    assert res.returncode == 0, res.stderr
    try:
        inv = inv_in(lab, tmp_path, **driver(NEW))
        boot = lab.boot_id(host)
        text = plan(lab, inv, host)
        assert f"driver none loaded, {NEW} (open) wanted: reboot: nouveau is loaded" in text, text
        code, evs, _ = run(lab, inv, "-l", host, "--no-smoke")
        assert code == ExitCode.OK, finished(evs)
        assert len(of(evs, "reboot-started", host)) == 1 and lab.boot_id(host) != boot
        assert loaded(inv, host) == NEW and persistenced(inv, host)
    finally:
        assert lab.gpunode("lab", "fault", host, "nouveau", "--off").returncode == 0


def test_a_gpu_process_makes_it_a_reboot_and_the_plan_says_why(lab: Lab, tmp_path: Path) -> None:
    host = "lab-02"
    inv = installed(lab, tmp_path, host)
    res = lab.gpunode("lab", "fault", host, "gpu-busy", "1024")
    assert res.returncode == 0, res.stderr
    try:
        pid = on_host(inv, host, "cat /run/gpunode-lab-gpu-busy.pid").strip()
        boot = lab.boot_id(host)
        refused = lab.gpunode("plan", str(inv), "-l", host)  # busy GPUs: refused
        assert refused.returncode == ExitCode.BAD_INPUT, refused.stdout
        assert "GPUs in use, and the plan has a reboot" in refused.stdout, refused.stdout
        text = plan(lab, inv, host, "--allow-busy")
        assert f"wanted: reboot: python3 (pid {pid}) holds the GPUs" in text, text
        code, evs, _ = run(lab, inv, "-l", host, "--no-smoke", "--allow-busy")
    finally:
        assert lab.gpunode("lab", "fault", host, "gpu-busy", "--off").returncode == 0
    assert code == ExitCode.OK, finished(evs)
    assert len(of(evs, "reboot-started", host)) == 1 and lab.boot_id(host) != boot
    assert loaded(inv, host) == NEW


def test_a_refused_unload_reboots_instead(lab: Lab, tmp_path: Path) -> None:
    """A job takes the GPU after the facts were read (here: the before_disrupt hook starts
    it): the kernel refuses the unload, the old module stays, and the host reboots."""
    host = "lab-01"
    hooks = {"before_disrupt": HOLDER.format(name="late-job")}
    inv = with_settings(installed(lab, tmp_path, host), hooks=hooks)
    assert "reload the nvidia module: nothing holds the GPUs" in plan(lab, inv, host)
    boot = lab.boot_id(host)
    code, evs, _ = run(lab, inv, "-l", host, "--no-smoke")
    assert code == ExitCode.OK, finished(evs)
    said = "the module could not be unloaded (modprobe: FATAL: Module nvidia is in use.)"
    skipped = [e for e in of(evs, "change-finished", host) if e["status"] == "skipped"]
    assert [e["message"] for e in skipped] == [f"{said}: reboot instead"], skipped
    (reboot,) = of(evs, "reboot-started", host)
    assert reboot["reason"] == f"driver {OLD} (open) loaded, {NEW} (open) wanted: reboot: {said}"
    assert lab.boot_id(host) != boot and loaded(inv, host) == NEW and persistenced(inv, host)


def test_a_version_mismatch_after_an_unattended_upgrade_is_fixed_by_a_reload(
    lab: Lab, tmp_path: Path
) -> None:
    host = "lab-02"
    installed(lab, tmp_path / "old", host)
    res = lab.gpunode("lab", "fault", host, "bg-upgrade")
    assert res.returncode == 0 and f"{OLD} -> {NEW}" in res.stdout, res.stdout + res.stderr
    inv = inv_in(lab, tmp_path / "branch", **driver(), smoke=["nvidia-smi"])
    smi = on_host(inv, host, "nvidia-smi; echo rc=$?")
    assert smi == (
        "Failed to initialize NVML: Driver/library version mismatch\n"
        "NVML library version: 550.163\nrc=18\n"
    )
    facts = lab.gpunode("facts", str(inv), "-l", host).stdout
    assert f"module {OLD} loaded, user space {NEW} installed" in facts, facts
    text = plan(lab, inv, host)
    why = f"driver {OLD} (open) loaded, {NEW} (open) wanted: reload the nvidia module"
    assert why in text, text
    boot = lab.boot_id(host)
    code, evs, _ = run(lab, inv, "-l", host)
    assert code == ExitCode.OK, finished(evs)
    smoke = [r["result"]["status"] for r in of(evs, "smoke-result", host)]
    assert smoke and set(smoke) == {"pass"}, smoke
    assert lab.boot_id(host) == boot and loaded(inv, host) == NEW
    assert on_host(inv, host, "nvidia-smi >/dev/null; echo rc=$?") == "rc=0\n"
    assert "mismatch" not in lab.gpunode("facts", str(inv), "-l", host).stdout
    code, evs, _ = run(lab, inv, "-l", host)
    assert code == ExitCode.OK and of(evs, "change-started") == [], finished(evs)
