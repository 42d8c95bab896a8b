"""GPUs in use and the inventory's hooks: what a disruptive plan (a reboot, a driver change
under a loaded module) is refused for, or carries."""

from __future__ import annotations

from test_planner import NO_SYSTEMD, converged

from gpunode.facts.model import GpuProcess, HostFacts
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host

BUSY = [GpuProcess(pid=4242, name="python3", memory_mib=40960),
        GpuProcess(pid=77, name="Xorg")]  # fmt: skip
HOOKS = STACK.replace(
    "hosts:\n  gpu1: {}",
    "hosts:\n  gpu1:\n    hooks:\n"
    "      before_disrupt: 'scontrol update nodename={{ host }} state=drain reason=gpunode'\n"
    "      after_disrupt: 'scontrol update nodename={{ host | q }} state=resume'\n",
)
SWITCH = ('branch: "550"', 'branch: "570"')


def _old() -> HostFacts:
    return converged(host_from(STACK), fresh_facts())


def test_busy_gpus_refuse_a_driver_switch_naming_each_process_and_the_flag() -> None:
    host = host_from(STACK.replace(*SWITCH))
    plan = plan_host(host, _old().model_copy(update={"gpu_processes": BUSY}), probes=NO_SYSTEMD)
    assert plan.refused == (
        "GPUs in use, and the plan has a reboot: pid 4242 (python3, 40960 MiB); pid 77 (Xorg); "
        "stop them (or drain the host), or pass --allow-busy"
    )
    assert plan.changes == ()


def test_allow_busy_plans_the_switch_with_the_hooks_rendered() -> None:
    host = host_from(HOOKS.replace(*SWITCH))
    facts = _old().model_copy(update={"gpu_processes": BUSY})
    plan = plan_host(host, facts, probes=NO_SYSTEMD, allow_busy=True)
    assert plan.refused is None and plan.needs_reboot
    assert plan.hooks == (
        ("before_disrupt", "scontrol update nodename=gpu1 state=drain reason=gpunode"),
        ("after_disrupt", "scontrol update nodename=gpu1 state=resume"),
    )
    assert plan.to_json()["hooks"]["after_disrupt"] == "scontrol update nodename=gpu1 state=resume"


def test_busy_gpus_and_hooks_do_not_matter_without_a_disruption() -> None:
    host = host_from(HOOKS)
    busy = _old().model_copy(update={"gpu_processes": BUSY})
    assert plan_host(host, busy, probes=NO_SYSTEMD).empty
    # a change that leaves the driver alone (a drifted file) runs on busy GPUs, no hooks
    drifted = busy.model_copy(update={"files": dict.fromkeys(busy.files, "0" * 64)})
    plan = plan_host(host, drifted, probes=NO_SYSTEMD)
    assert plan.refused is None and plan.changes and not plan.needs_reboot
    assert plan.hooks == ()


def test_a_hook_that_does_not_render_refuses_the_host() -> None:
    host = host_from(HOOKS.replace("{{ host }}", "{{ host.__class__ }}").replace(*SWITCH))
    plan = plan_host(host, _old(), probes=NO_SYSTEMD)
    assert plan.refused is not None and plan.refused.startswith("hooks: before_disrupt: ")
