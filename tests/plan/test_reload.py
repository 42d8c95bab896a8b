"""stack.driver.reload: a driver change planned as a module reload where nothing holds the
GPUs, as a reboot (saying why) where something does, and folded into a reboot the plan
has anyway; a reload disrupts as a reboot does."""

from __future__ import annotations

from test_planner import NO_SYSTEMD, converged

from gpunode.changes import Change, Step
from gpunode.facts.model import GpuProcess, HostFacts
from gpunode.plan.planner import _order as order
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host

RELOAD = STACK.replace('branch: "550", flavor: open', 'branch: "570", flavor: open, reload: true')
HOOKS = RELOAD.replace(
    "hosts:\n  gpu1: {}",
    "hosts:\n  gpu1:\n    hooks: {before_disrupt: drain, after_disrupt: resume}\n",
)
WHY = "driver 550.163.01 (open) loaded, 570.195.03 (open) wanted"


def _old() -> HostFacts:
    return converged(host_from(STACK), fresh_facts())


def test_an_idle_host_reloads_last_with_the_hooks_and_no_reboot() -> None:
    plan = plan_host(host_from(HOOKS), _old(), probes=NO_SYSTEMD)
    assert plan.refused is None and not plan.needs_reboot
    last = plan.changes[-1]
    assert last.op == "module_reload" and last.reload == WHY
    assert last.reason == f"{WHY}: reload the nvidia module: nothing holds the GPUs"
    assert "modprobe -r $was" in last.steps[0].command
    assert [c for c in plan.changes if c.op == "module_reload"] == [last]
    assert dict(plan.hooks) == {"before_disrupt": "drain", "after_disrupt": "resume"}


def test_busy_gpus_refuse_the_reload_unless_allowed_then_it_is_a_reboot() -> None:
    busy = _old().model_copy(update={"gpu_processes": [GpuProcess(pid=77, name="Xorg")]})
    plan = plan_host(host_from(RELOAD), busy, probes=NO_SYSTEMD)
    assert plan.refused is not None and "pid 77 (Xorg)" in plan.refused
    plan = plan_host(host_from(RELOAD), busy, probes=NO_SYSTEMD, allow_busy=True)
    assert plan.needs_reboot
    assert plan.changes[-1].reason == f"{WHY}: reboot: Xorg (pid 77) holds the GPUs"
    assert all(c.reload is None for c in plan.changes)


def test_a_reload_is_folded_into_a_reboot_the_plan_has_anyway() -> None:
    reload = Change("driver", "load", "module_reload", f"{WHY}: reload", (Step("x"),), reload=WHY)
    kernel = Change("kernel", "reboot", "reboot", "a new kernel", (), reboot=True)
    other = Change("cuda", "file", "file", "drifted", (Step("y"),))
    out = order([reload, kernel, other], 120)
    assert [c.op for c in out] == ["file", "reboot"]
    assert out[-1].reason == f"a new kernel; {WHY}: reboot needed"
    # without a reboot, the reload runs last
    assert [c.op for c in order([reload, other], 120)] == ["file", "module_reload"]
