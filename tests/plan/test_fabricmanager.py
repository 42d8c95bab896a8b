"""NVSwitch systems: Fabric Manager in lockstep with the driver, and its service."""

from __future__ import annotations

from test_planner import NO_SYSTEMD, converged

from gpunode.changes import Change, HostPlan
from gpunode.facts.model import Fabric, GpuFabric, HostFacts, NvSwitch, Package
from gpunode.inventory import Host
from gpunode.plan.planner import probes_for
from gpunode.roles.ops.base import probe_key
from tests.plan.planhelpers import STACK, host_from, plan_host

NVSWITCHES = [NvSwitch(slot=f"0000:0{7 + i}:00.0", device_id="22a3") for i in range(4)]
FM = "nvidia-fabricmanager-550"


def hgx(facts: HostFacts, fm: str | None = "550.163.01-1") -> HostFacts:
    """The facts with four NVSwitches and, when given, Fabric Manager at `fm`, held."""
    packages = dict(facts.packages)
    if fm is not None:
        packages[FM] = Package(name=FM, version=fm, status="hold ok installed")
    holds = sorted({*facts.gpunode_holds, *([FM] if fm else [])})
    return facts.model_copy(
        update={"nvswitches": NVSWITCHES, "packages": packages, "gpunode_holds": holds}
    )


def service(host: Host, facts: HostFacts, enabled: bool, active: bool) -> dict[str, bool]:
    """Probe answers: systemd, persistenced as it should be, the fabric manager as given
    (its probes are asked for before the versions are resolved, in apply's first read)."""
    out = {p.key: True for p in probes_for(host, facts)}
    out[probe_key("enabled", "nvidia-fabricmanager")] = enabled
    out[probe_key("active", "nvidia-fabricmanager")] = active
    return out


def apt_change(plan: HostPlan) -> Change:
    (change,) = [c for c in plan.changes if c.op == "apt_packages"]
    return change


def installs(change: Change) -> list[str]:
    return [t for s in change.steps for t in s.installs]


def test_fresh_hgx_host_gets_fabric_manager_in_the_drivers_transaction(
    host: Host, fresh: HostFacts
) -> None:
    plan = plan_host(host, hgx(fresh, fm=None), probes=NO_SYSTEMD)
    driver = next(c for c in plan.changes if "'nvidia-open-550=550.163.01-*'" in installs(c))
    # the same apt-get install, the same pin, the same hold
    assert f"'{FM}=550.163.01-*'" in installs(driver)
    holds = [s.command for s in driver.steps if s.command.startswith("apt-mark hold")]
    assert holds and FM in holds[0].split() and "nvidia-open-550" in holds[0].split()
    # started only once the module of its release is loaded, after the reboot
    assert not [c for c in plan.changes if c.op == "service" and "fabricmanager" in c.title]
    assert plan.needs_reboot


def test_converged_hgx_host_starts_the_service_and_is_then_done(
    host: Host, fresh: HostFacts
) -> None:
    facts = hgx(converged(host, fresh))
    assert plan_host(host, facts, probes=service(host, facts, True, True)).changes == ()
    plan = plan_host(host, facts, probes=service(host, facts, False, False))
    assert [c.commands for c in plan.changes] == [
        ["systemctl enable nvidia-fabricmanager", "systemctl start nvidia-fabricmanager"]
    ]


def test_fabric_manager_left_at_another_release_is_put_at_the_drivers(
    host: Host, fresh: HostFacts
) -> None:
    facts = hgx(converged(host, fresh), fm="550.127.05-1")
    plan = plan_host(host, facts, probes=service(host, facts, True, False))
    change = apt_change(plan)
    assert installs(change) == [f"'{FM}=550.163.01-*'"]  # the driver itself stays
    assert change.reason == f"{FM} 550.127.05-1 installed, 550.163.01-* wanted"
    assert plan.changes[-1].commands == ["systemctl start nvidia-fabricmanager"]
    assert not plan.needs_reboot


def test_a_branch_switch_replaces_the_held_fabric_manager_in_the_same_transaction(
    fresh: HostFacts,
) -> None:
    host = host_from(STACK.replace('branch: "550"', 'branch: "570"').replace('"12.4"', '"12.8"'))
    old = host_from(STACK)
    facts = hgx(converged(old, fresh))
    plan = plan_host(host, facts, probes=NO_SYSTEMD, allow_change_held=True)
    targets = [t for c in plan.changes for t in installs(c)]
    driver = next(t for t in targets if t.startswith("'nvidia-open-570="))
    release = driver.split("=")[1].rstrip("'")
    assert f"'nvidia-fabricmanager-570={release}'" in targets
    assert f"{FM}-" in targets  # removed in the same apt-get install
    assert len([c for c in plan.changes if {driver, f"{FM}-"} <= set(installs(c))]) == 1


def test_no_nvswitch_no_fabric_manager(host: Host, fresh: HostFacts) -> None:
    """A VM given two GPUs of an NVSwitch board (the real 2x H200 capture) sees the fabric
    Completed but no NVSwitch: its fabric manager runs outside, none is installed here."""
    completed = Fabric(
        gpus=[GpuFabric(bus_id=f"00000000:00:0{6 + i}.0", state="Completed", status="Success")
              for i in range(2)]
    )  # fmt: skip
    for facts in (fresh, converged(host, fresh)):
        facts = facts.model_copy(update={"fabric": completed})
        plan = plan_host(host, facts, probes=NO_SYSTEMD)
        assert "fabricmanager" not in " ".join(s.command for c in plan.changes for s in c.steps)
        assert not [p for p in probes_for(host, facts) if "fabricmanager" in p.command]
