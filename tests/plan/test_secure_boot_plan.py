"""Secure Boot: DKMS only with an enrolled key; Ubuntu's signed modules (driver source
ubuntu) with neither DKMS nor kernel headers."""

from __future__ import annotations

from gpunode.facts.model import HostFacts, Kernels, MokKey
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host

UBUNTU_STACK = """
defaults:
  connection: local
  stack:
    driver: {source: ubuntu, branch: "570", server: true, flavor: open}
    cuda: null
    cudnn: null
    nccl: null
    cuda_env: false
hosts:
  gpu1: {}
"""
UTILS = "nvidia-utils-570-server"
OFFERED = {
    UTILS: [
        "570.172.08-0ubuntu0.22.04.1",
        "570.133.20-0ubuntu0.22.04.2",
        "570.86.15-0ubuntu0.22.04.3",
    ],
    "linux-modules-nvidia-570-server-open-6.8.0-45-generic": ["6.8.0-45.45~22.04.1+2"],
}


def secure(**kw: object) -> HostFacts:
    return fresh_facts(secure_boot=True, **kw)


def test_dkms_with_secure_boot_and_no_enrolled_key_is_refused_with_the_remedies() -> None:
    host = host_from(STACK)
    for key in (MokKey(), MokKey(present=True, enrolled=False), MokKey(present=True)):
        why = plan_host(host, secure(mok_key=key)).refused
        assert why is not None and why.startswith("Secure Boot is on")
        for remedy in ("stack.driver.source: ubuntu", "update-secureboot-policy --new-key",
                       "mokutil --import /var/lib/shim-signed/mok/MOK.der", "MOK manager",
                       "disable Secure Boot"):  # fmt: skip
            assert remedy in why


def test_dkms_with_secure_boot_and_the_key_enrolled_is_planned() -> None:
    plan = plan_host(host_from(STACK), secure(mok_key=MokKey(present=True, enrolled=True)))
    assert plan.refused is None
    assert any(c.op == "dkms_built" for c in plan.changes)


def ubuntu_plan(facts: HostFacts) -> str:
    plan = plan_host(host_from(UBUNTU_STACK), facts, catalog=None)
    assert plan.refused is None, plan.refused
    (driver,) = [c for c in plan.changes if c.role == "driver" and c.op == "apt_packages"]
    assert not any(c.op in ("dkms_built", "kernel_headers") for c in plan.changes)
    return " ".join(s.command for s in driver.steps)


def test_ubuntu_source_installs_the_signed_modules_and_the_newest_release() -> None:
    install = ubuntu_plan(secure(apt_versions=OFFERED))
    for pkg in (
        "linux-modules-nvidia-570-server-open-6.8.0-45-generic",
        "nvidia-headless-no-dkms-570-server-open=570.172.08-*",
        "nvidia-utils-570-server=570.172.08-*",
        "nvidia-compute-utils-570-server=570.172.08-*",
    ):
        assert pkg in install
    assert "dkms" not in install.replace("no-dkms", "")


def test_ubuntu_source_with_a_pin_and_a_kernel_waiting_for_the_reboot() -> None:
    nxt = "linux-modules-nvidia-570-server-open-6.8.0-49-generic"
    facts = secure(
        apt_versions={**OFFERED, nxt: ["6.8.0-49.49~22.04.1+1"]},
        kernels=Kernels(installed=["6.8.0-45-generic", "6.8.0-49-generic"],
                        next_boot="6.8.0-49-generic"),
    )  # fmt: skip
    host = host_from(UBUNTU_STACK.replace('branch: "570"', 'version: "570.133.20"'))
    plan = plan_host(host, facts, catalog=None)
    assert plan.refused is None, plan.refused
    cmds = " ".join(s.command for c in plan.changes for s in c.steps)
    assert nxt in cmds and "linux-modules-nvidia-570-server-open-6.8.0-45-generic" in cmds
    assert "nvidia-utils-570-server=570.133.20-*" in cmds


def test_ubuntu_source_refuses_a_kernel_ubuntu_built_no_signed_modules_for() -> None:
    facts = secure(apt_versions={UTILS: OFFERED[UTILS]})
    why = plan_host(host_from(UBUNTU_STACK), facts, catalog=None).refused
    assert why is not None
    assert "no linux-modules-nvidia-570-server-open-6.8.0-45-generic for kernel 6.8.0-45" in why


def test_ubuntu_source_names_the_proprietary_and_desktop_packages() -> None:
    stack = UBUNTU_STACK.replace(
        "server: true, flavor: open", "flavor: proprietary, headless: false"
    )
    offered = {"nvidia-utils-570": ["570.172.08-0ubuntu0.22.04.1"],
               "linux-modules-nvidia-570-6.8.0-45-generic": ["6.8.0-45.45~22.04.1+2"]}  # fmt: skip
    plan = plan_host(host_from(stack), fresh_facts(apt_versions=offered), catalog=None)
    assert plan.refused is None, plan.refused
    cmds = " ".join(s.command for c in plan.changes for s in c.steps)
    assert "linux-modules-nvidia-570-6.8.0-45-generic" in cmds
    assert "nvidia-driver-570=570.172.08-*" in cmds and "-open" not in cmds


def test_server_and_headless_belong_to_the_ubuntu_source() -> None:
    import pytest

    from gpunode.inventory import InventoryError

    with pytest.raises(InventoryError, match="set source: ubuntu"):
        host_from(STACK.replace("flavor: open}", "flavor: open, server: true}"))


def test_ubuntu_source_on_a_host_whose_apt_lists_are_empty_reads_them_after_an_update() -> None:
    plan = plan_host(host_from(UBUNTU_STACK), secure(), catalog=None)
    assert plan.refused is None and plan.versions_on_host == (UTILS,)
