"""Secure Boot through `gpunode plan`/`apply` on lab hosts: DKMS's module needs the enrolled
MOK, Ubuntu's signed modules (driver source: ubuntu) need nothing.

Every assertion reads the host: dpkg's database, its files, the loaded module, the kernel's
log of the boot and the lab's boot count.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_dkms_lab import boots, loaded

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages, wait_for_ssh

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NONE = {"cuda": None, "cudnn": None, "nccl": None, "cuda_env": False, "smoke": []}
DKMS = {"driver": {"branch": "580", "flavor": "open", "hold": True}, **NONE}
UBUNTU = {"driver": {"source": "ubuntu", "branch": "570", "server": True}, **NONE}
MOK = "/var/lib/shim-signed/mok/MOK.der"


def knob(lab: Lab, host: str, *args: str) -> None:
    """`lab fault HOST KNOB [VALUE] [--off]` (test_dkms_lab's knob takes no value)."""
    res = lab.gpunode("lab", "fault", host, *args)
    assert res.returncode == 0, res.stderr


@pytest.fixture
def secure(lab: Lab) -> Iterator[Any]:
    """Knobs turned on for a test are turned off after it (they outlive `lab reset`)."""
    on: list[tuple[str, str]] = []

    def turn(host: str, name: str, *value: str) -> None:
        knob(lab, host, name, *value)
        on.append((host, name))

    yield turn
    for host, name in reversed(on):
        knob(lab, host, name, "--off")


def kmsg(inv: Path, host: str) -> str:
    return on_host(inv, host, "cat /run/gpunode-lab-kmsg 2>/dev/null || true")


def facts(lab: Lab, inv: Path, host: str) -> dict[str, Any]:
    res = lab.gpunode("facts", str(inv), "--json", "--limit", host)
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout)["hosts"][host]["facts"])


def test_dkms_without_an_enrolled_key_is_refused_and_nothing_changes(
    lab: Lab, tmp_path: Path, secure: Any
) -> None:
    host = "lab-01"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **DKMS)
    secure(host, "secure-boot")
    secure(host, "mok-key", "present")  # made, never confirmed at the MOK manager
    f = facts(lab, inv, host)
    assert f["secure_boot"] is True and f["mok_key"] == {"present": True, "enrolled": False}
    assert on_host(inv, host, f"mokutil --test-key {MOK} || true").strip() == (
        f"{MOK} is not enrolled"
    )
    dpkg, tree, before = packages(inv, host), lab.tree(host), boots(lab, host)

    plan = lab.gpunode("plan", str(inv), "--limit", host)
    assert plan.returncode == 4, plan.stdout + plan.stderr
    for remedy in ("stack.driver.source: ubuntu", "update-secureboot-policy --new-key",
                   f"mokutil --import {MOK}", "MOK manager", "disable Secure Boot"):  # fmt: skip
        assert remedy in plan.stdout + plan.stderr
    code, evs = apply(lab, inv, "--limit", host)
    assert code == 4
    (done,) = of(evs, "host-finished", host)
    assert done["message"].startswith("refused: Secure Boot is on")
    assert of(evs, "change-started") == []
    assert packages(inv, host) == dpkg and lab.tree(host) == tree and boots(lab, host) == before


def test_dkms_with_the_key_enrolled_converges_with_a_signed_module(
    lab: Lab, tmp_path: Path, secure: Any
) -> None:
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **DKMS)
    secure(host, "secure-boot")
    secure(host, "mok-key")  # enrolled
    assert facts(lab, inv, host)["mok_key"] == {"present": True, "enrolled": True}
    before = boots(lab, host)

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    version = packages(inv, host)["libnvidia-compute-580"][0].split("-")[0]
    assert boots(lab, host) == before + 1
    assert loaded(inv, host) == version  # signed with the enrolled key: the kernel took it
    kernel = on_host(inv, host, "uname -r").strip()
    ko = on_host(inv, host, f"cat /lib/modules/{kernel}/updates/dkms/nvidia.ko")
    assert "signer: MOK " in ko and kmsg(inv, host) == ""


def test_an_unsigned_dkms_module_is_rejected_once_secure_boot_is_on(
    lab: Lab, tmp_path: Path, secure: Any
) -> None:
    """The lab's kernel enforces what the planner refuses (a test of the lab itself)."""
    host = "lab-01"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **DKMS)
    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    version = loaded(inv, host)
    assert version and "module verification failed" in kmsg(inv, host)  # loads, tainted

    secure(host, "secure-boot")
    assert lab.gpunode("lab", "reboot", host).returncode == 0
    wait_for_ssh(lab, host)
    assert loaded(inv, host) == ""
    assert "Key was rejected by service" in kmsg(inv, host)


def test_ubuntu_signed_modules_converge_under_secure_boot_without_dkms(
    lab: Lab, tmp_path: Path, secure: Any
) -> None:
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **UBUNTU)
    secure(host, "secure-boot")  # and no key at all
    kernel = on_host(inv, host, "uname -r").strip()
    before = boots(lab, host)

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    pk = packages(inv, host)
    assert {
        f"linux-modules-nvidia-570-server-open-{kernel}",
        "nvidia-headless-no-dkms-570-server-open",
        "nvidia-utils-570-server",
        "nvidia-compute-utils-570-server",
    } <= set(pk)
    assert pk["nvidia-utils-570-server"] == ("570.172.08-0ubuntu0.22.04.2", True)  # newest, held
    assert not [p for p in pk if p == "dkms" or p.startswith(("nvidia-dkms", "linux-headers"))]
    assert boots(lab, host) == before + 1
    assert loaded(inv, host) == "570.172.08" and kmsg(inv, host) == ""
    f = facts(lab, inv, host)
    assert f["secure_boot"] is True and f["mok_key"]["present"] is False

    code, evs = apply(lab, inv, "--limit", host)  # converged: nothing left to do
    assert code == 0 and of(evs, "change-finished") == [] and boots(lab, host) == before + 1


def test_a_kernel_ubuntu_built_no_signed_modules_for_is_refused_at_plan_time(
    lab: Lab, tmp_path: Path
) -> None:
    from gpunode_lab.repo.catalog_kernel import newer_kernel

    host = "lab-01"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **UBUNTU)
    knob(lab, host, "newer-kernel")  # boots next; the lab's archive has no modules for it
    # the lists as a host that ran apt-get update has them: the plan then reads them
    assert on_host(inv, host, "sudo apt-get -qq update >/dev/null 2>&1; echo $?").strip() == "0"
    dpkg, tree, before = packages(inv, host), lab.tree(host), boots(lab, host)

    plan = lab.gpunode("plan", str(inv), "--limit", host)
    assert plan.returncode == 4, plan.stdout + plan.stderr
    wanted = f"linux-modules-nvidia-570-server-open-{newer_kernel()}"
    assert f"has no {wanted} for kernel {newer_kernel()}" in plan.stdout + plan.stderr
    code, evs = apply(lab, inv, "--limit", host)
    assert code == 4 and of(evs, "change-started") == []
    assert packages(inv, host) == dpkg and lab.tree(host) == tree and boots(lab, host) == before
