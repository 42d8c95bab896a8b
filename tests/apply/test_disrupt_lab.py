"""Disruptive changes through the CLI on lab hosts: busy GPUs refuse a driver change, the
inventory's hooks run around the reboot, `--no-reboot` leaves it pending (exit 8) for the
next apply, and `reboot.timeout` bounds the wait. Assertions read the hosts' real state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_faults_hosts import REBOOT_ROLE, fault, finished, inventory, run, wait_up

from gpunode.exitcodes import ExitCode
from tests.apply.labhelpers import Lab, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
LOG = "/var/tmp/gpunode-hooks.log"
HOOKS = {
    "before_disrupt": f"echo before {{{{ host }}}} $(cat /proc/sys/kernel/random/boot_id) >> {LOG}",
    "after_disrupt": f"echo after {{{{ host }}}} $(cat /proc/sys/kernel/random/boot_id) >> {LOG}",
}
DRIVER: dict[str, Any] = {"driver": {"branch": "550", "flavor": "open", "hold": True}}


def with_settings(inv: Path, **settings: Any) -> Path:
    """The inventory with `defaults` keys (hooks, reboot) set."""
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(inv.read_text())
    for key, value in settings.items():
        doc["defaults"][key] = value
    with inv.open("w") as fh:
        yaml.dump(doc, fh)
    return inv


def hook_log(inv: Path) -> list[str]:
    return on_host(inv, HOST, f"cat {LOG} 2>/dev/null || true").splitlines()


def test_no_reboot_then_apply_reboots_once_with_the_hooks_around_it(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    inv = with_settings(inventory(lab, tmp_path, {}, {}, **DRIVER), hooks=HOOKS)
    boot0 = lab.boot_id(HOST)
    plan = lab.gpunode("plan", str(inv), "-l", HOST)
    assert f"hook before_disrupt: $ [sudo] echo before {HOST} " in plan.stdout, plan.stdout

    code, evs, _ = run(lab, inv, "-l", HOST, "--no-reboot", "--no-smoke")
    assert code == ExitCode.REBOOT_PENDING, finished(evs)
    assert finished(evs)[HOST][0] == "reboot-pending"
    assert len(of(evs, "reboot-pending", HOST)) == 1 and of(evs, "reboot-started") == []
    assert evs[-1]["hosts"][0]["status"] == "reboot-pending"
    assert packages(inv, HOST)["nvidia-open-550"][0].startswith("550.163.01-")
    assert lab.boot_id(HOST) == boot0
    # drained before the packages changed; not resumed while the reboot is pending
    assert hook_log(inv) == [f"before {HOST} {boot0}"]

    code, evs, _ = run(lab, inv, "-l", HOST, "--no-smoke")
    assert code == ExitCode.OK, finished(evs)
    assert len(of(evs, "reboot-started", HOST)) == 1
    boot1 = lab.boot_id(HOST)
    assert boot1 != boot0
    assert on_host(inv, HOST, "cat /sys/module/nvidia/version").strip() == "550.163.01"
    assert hook_log(inv) == [f"before {HOST} {boot0}", f"before {HOST} {boot0}",
                             f"after {HOST} {boot1}"]  # fmt: skip

    code, evs, _ = run(lab, inv, "-l", HOST, "--no-smoke")  # nothing disruptive: no hooks
    assert (
        code == ExitCode.OK and of(evs, "hook-finished") == [] and of(evs, "reboot-started") == []
    )
    assert len(hook_log(inv)) == 3 and lab.boot_id(HOST) == boot1


def test_busy_gpus_refuse_a_driver_switch_until_allow_busy(lab: Lab, tmp_path: Path) -> None:
    inv = inventory(lab, tmp_path, {}, {}, **DRIVER)
    code, evs, _ = run(lab, inv, "-l", HOST, "--no-smoke")  # 550 loaded (or made so)
    assert code == ExitCode.OK, finished(evs)
    (tmp_path / "570").mkdir()
    inv = inventory(lab, tmp_path / "570", {}, {}, driver={"branch": "570", "flavor": "open"})
    res = lab.gpunode("lab", "fault", HOST, "gpu-busy", "40960")
    assert res.returncode == 0, res.stderr
    try:
        pid = on_host(inv, HOST, "cat /run/gpunode-lab-gpu-busy.pid").strip()
        facts = lab.gpunode("facts", str(inv), "-l", HOST).stdout
        assert f"pid {pid} (python3, 40960 MiB)" in facts and " persistence " in facts, facts
        dpkg, tree = packages(inv, HOST), lab.tree(HOST)
        plan = lab.gpunode("plan", str(inv), "-l", HOST)
        assert plan.returncode == ExitCode.BAD_INPUT, plan.stdout + plan.stderr
        assert f"pid {pid} (python3, 40960 MiB)" in plan.stdout, plan.stdout
        assert "--allow-busy" in plan.stdout
        code, evs, _ = run(lab, inv, "-l", HOST, "--no-smoke")
        assert code == ExitCode.BAD_INPUT
        status, message = finished(evs)[HOST]
        assert status == "failed" and f"pid {pid} (python3, 40960 MiB)" in message, message
        assert packages(inv, HOST) == dpkg and lab.tree(HOST) == tree

        assert lab.gpunode("plan", str(inv), "-l", HOST, "--allow-busy").returncode == 0
        code, evs, _ = run(lab, inv, "-l", HOST, "--no-smoke", "--allow-busy", "--no-reboot")
        assert code == ExitCode.REBOOT_PENDING, finished(evs)
        assert packages(inv, HOST)["nvidia-open-570"][0].startswith("570.")
    finally:
        assert lab.gpunode("lab", "fault", HOST, "gpu-busy", "--off").returncode == 0


def test_reboot_timeout_from_the_inventory(lab: Lab, tmp_path: Path) -> None:
    inv = inventory(lab, tmp_path, {}, {"again": REBOOT_ROLE}, roles=["again"])
    inv = with_settings(inv, reboot={"timeout": 3})
    wait_up(inv, HOST)

    def refuse(e: dict[str, Any]) -> None:
        if e["event"] == "reboot-started":  # sshd will not come back after the reboot
            fault(lab, HOST, "refuse")

    try:
        code, evs, secs = run(lab, inv, "-l", HOST, on=refuse)
    finally:
        fault(lab, HOST, "refuse", off=True)
    assert code == ExitCode.FAILED, finished(evs)
    status, message = finished(evs)[HOST]
    assert status == "failed" and "no new boot within 3 s (the reboot timeout)" in message
    assert secs < 25
    wait_up(inv, HOST)


def test_a_failing_before_disrupt_fails_the_host_with_nothing_changed(
    lab: Lab, tmp_path: Path
) -> None:
    inv = inventory(lab, tmp_path, {}, {"again": REBOOT_ROLE}, roles=["again"])
    inv = with_settings(inv, hooks={"before_disrupt": "echo not drained >&2; exit 3",
                                    "after_disrupt": HOOKS["after_disrupt"]})  # fmt: skip
    wait_up(inv, HOST)
    boot, tree = lab.boot_id(HOST), lab.tree(HOST)
    code, evs, _ = run(lab, inv, "-l", HOST)
    assert code == ExitCode.FAILED, finished(evs)
    status, message = finished(evs)[HOST]
    assert status == "failed" and message == "hook before_disrupt failed (exit 3: not drained)"
    assert [(e["hook"], e["status"]) for e in of(evs, "hook-finished")] == [
        ("before_disrupt", "failed")
    ]
    assert of(evs, "reboot-started") == [] and lab.boot_id(HOST) == boot
    assert lab.tree(HOST) == tree
