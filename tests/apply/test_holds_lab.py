"""Holds, unattended-upgrades and nouveau through `gpunode plan`/`apply` on lab hosts.

Every assertion reads the host: dpkg's database, apt's own parse of its configuration,
files, the loaded modules, the lab's boot count and the hosts' written trees.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpunode.exitcodes import ExitCode
from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

DRIVER_ONLY: dict[str, Any] = {
    "driver": {"branch": "550", "flavor": "open"},
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}
UU = "/etc/apt/apt.conf.d/51gpunode-unattended-upgrades"
HOLDS = "/var/lib/gpunode/holds"
INITRD = '"/boot/initrd.img-$(uname -r)"'
ADMIN = ("nvidia-open-550=550.127.05-1", "libnvidia-compute-550=550.127.05-0ubuntu1")


def boots(lab: Lab, host: str) -> int:
    doc = json.loads(lab.gpunode("lab", "status", "--json").stdout)
    return int({h["name"]: h for h in doc["hosts"]}[host]["boots"])


def knob(lab: Lab, host: str, name: str, *, off: bool = False) -> None:
    res = lab.gpunode("lab", "fault", host, name, *(["--off"] if off else []))
    assert res.returncode == 0, res.stderr


def module_loaded(inv: Path, host: str, module: str) -> bool:
    return on_host(inv, host, f"test -d /sys/module/{module} && echo y || echo n").strip() == "y"


def test_first_install_with_nouveau_loaded(lab: Lab, tmp_path: Path) -> None:
    """nouveau is loaded (from the initramfs) on a fresh host: the blacklist goes into a
    rebuilt initramfs, one reboot, and then nvidia is loaded and nouveau is not. The same
    run keeps the driver out of unattended-upgrades and records gpunode's holds."""
    host = "lab-01"
    fresh(lab, host)
    knob(lab, host, "nouveau")
    try:
        inv = lab.inventory(tmp_path, **DRIVER_ONLY)
        assert module_loaded(inv, host, "nouveau") and not module_loaded(inv, host, "nvidia")
        initrd_before = on_host(inv, host, f"sha256sum < {INITRD}")
        booted = boots(lab, host)

        code, evs = apply(lab, inv, "--limit", host)
        assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]

        assert len(of(evs, "reboot-started", host)) == 1
        assert boots(lab, host) == booted + 1
        assert on_host(inv, host, f"sha256sum < {INITRD}") != initrd_before
        assert "blacklist nouveau\n" in on_host(inv, host, f"cat {INITRD}")
        # the knob is still on: the rebuilt initramfs alone keeps nouveau out
        assert not module_loaded(inv, host, "nouveau")
        assert on_host(inv, host, "cat /sys/module/nvidia/version").strip() == "550.163.01"

        # unattended-upgrades: the file, and apt's own parse of it
        assert on_host(inv, host, f"stat -c '%a %U:%G' {UU}").strip() == "644 root:root"
        dump = on_host(inv, host, "apt-config dump Unattended-Upgrade::Package-Blacklist")
        for pattern in ("nvidia-", "libnvidia-", "nvidia-fabricmanager"):
            assert f'Unattended-Upgrade::Package-Blacklist:: "{pattern}";' in dump, dump
        assert '"cuda-"' not in dump  # the stack has no toolkit

        # the holds gpunode set, and only those, are recorded as its own
        pk = packages(inv, host)
        held = sorted(n for n, (_, h) in pk.items() if h)
        assert held == ["libnvidia-compute-550", "nvidia-open-550"]
        assert on_host(inv, host, f"cat {HOLDS}").split() == held
        assert on_host(inv, host, f"stat -c '%a %U:%G' {HOLDS}").strip() == "644 root:root"

        code, evs = apply(lab, inv, "--limit", host)
        assert code == 0 and of(evs, "change-started") == [] and of(evs, "reboot-started") == []
    finally:
        knob(lab, host, "nouveau", off=True)


def test_an_admin_hold_is_not_overridden_without_allow_change_held(
    lab: Lab, tmp_path: Path
) -> None:
    """The admin installed and held an older driver; gpunode's pin would move it: plan and
    apply refuse the host naming the packages and the flag, and change nothing; with
    --allow-change-held the pin converges and the holds become gpunode's."""
    host = "lab-02"
    fresh(lab, host)
    admin = lab.gpunode("lab", "install", host, *ADMIN, "--hold", "--reboot")
    assert admin.returncode == 0, admin.stderr
    inv = lab.inventory(tmp_path, **{**DRIVER_ONLY, "driver": {"version": "550.163.01"}})
    assert on_host(inv, host, f"test -e {HOLDS} && echo y || echo n").strip() == "n"
    dpkg_before, tree_before = packages(inv, host), lab.tree(host)

    plan = lab.gpunode("plan", str(inv), "--limit", host, "--json")
    assert plan.returncode == ExitCode.BAD_INPUT, plan.stderr
    refused = json.loads(plan.stdout)["hosts"][host]["refused"]
    assert "libnvidia-compute-550, nvidia-open-550 held by the admin" in refused
    assert "--allow-change-held" in refused
    code, evs = apply(lab, inv, "--limit", host)
    assert code == ExitCode.BAD_INPUT
    assert of(evs, "change-started") == [] and of(evs, "reboot-started") == []
    assert "--allow-change-held" in of(evs, "host-finished", host)[0]["message"]
    assert packages(inv, host) == dpkg_before
    assert lab.tree(host) == tree_before, "a refused host was written to"

    plan = lab.gpunode("plan", str(inv), "--limit", host, "--json", "--allow-change-held")
    assert plan.returncode == 0, plan.stderr
    reasons = [c["reason"] for c in json.loads(plan.stdout)["hosts"][host]["changes"]]
    assert any(
        "changes the admin's hold on libnvidia-compute-550, nvidia-open-550" in r for r in reasons
    ), reasons
    code, evs = apply(lab, inv, "--limit", host, "--allow-change-held")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    pk = packages(inv, host)
    assert pk["nvidia-open-550"][0].startswith("550.163.01-") and pk["nvidia-open-550"][1]
    assert pk["libnvidia-compute-550"][0].startswith("550.163.01-")
    assert pk["libnvidia-compute-550"][1]
    assert on_host(inv, host, f"cat {HOLDS}").split() == [
        "libnvidia-compute-550",
        "nvidia-open-550",
    ]
    assert on_host(inv, host, "cat /sys/module/nvidia/version").strip() == "550.163.01"
    # gpunode's holds now: the next run plans nothing and needs no flag
    plan = lab.gpunode("plan", str(inv), "--limit", host, "--detailed-exitcode")
    assert plan.returncode == 0, plan.stdout + plan.stderr
