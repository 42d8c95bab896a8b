"""`apply`'s prompt fits a screen: 50 hosts' plans, made by the real planner from facts,
are summarised in at most 24 lines with the prompt, identical plans grouped, reboots,
disruptions and downgrades said; `--show-commands` prints every command."""

from __future__ import annotations

from dataclasses import replace

from test_resolution import NO_SYSTEMD, driver_550, stack

from gpunode.changes import HostPlan
from gpunode.hostpool import Outcome
from gpunode.views.planview import confirm_text
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host

PROMPT_LINES = 1  # "apply N change(s)? [y/N]"


def rows(lines: list[str]) -> int:
    """The rows the lines take on an 80-column terminal, a long one wrapped."""
    return sum(max(1, -(-len(line) // 80)) for line in lines)


def fleet() -> dict[str, Outcome[HostPlan]]:
    fresh = plan_host(host_from(STACK), fresh_facts(), probes=NO_SYSTEMD)
    pinned = host_from(stack(**{'branch: "550"': 'version: "550.127.05"'}))
    down = plan_host(pinned, driver_550("550.163.01"), probes=NO_SYSTEMD)
    assert fresh.refused is None and down.refused is None
    out: dict[str, Outcome[HostPlan]] = {}
    for i in range(1, 51):
        name = f"gpu-{i:02d}"
        if i <= 30:
            plan = replace(fresh, host=name)
        elif i <= 40:
            plan = replace(down, host=name)
        elif i <= 45:
            plan = HostPlan(name)
        elif i <= 48:
            plan = HostPlan(name, refused=f"stack.cudnn: cuDNN 9.12 is not in the mirror of {name}")
        else:
            out[name] = Outcome(name, "unreachable", error="connection refused")
            continue
        out[name] = Outcome(name, "ok", value=plan)
    return out


def test_fifty_hosts_fit_a_screen_grouped_with_what_matters() -> None:
    outcomes = fleet()
    fresh = outcomes["gpu-01"].value
    assert fresh is not None
    text, pending = confirm_text(outcomes)
    lines = text.splitlines()
    assert rows(lines) + PROMPT_LINES <= 24, text
    n = len(fresh.changes)
    assert any(line.startswith(f"30 hosts: same {n} changes (reboot, disrupts the GPUs)")
               for line in lines), text  # fmt: skip
    assert pending == sum(len(o.value.changes) for o in outcomes.values() if o.value)
    # the driver moved back to an older release is called a downgrade, on its group and
    # on its change
    downgrade = next(line for line in lines if line.startswith("10 hosts: same"))
    assert "1 downgrade" in downgrade and "disrupts the GPUs" in downgrade, text
    assert any(
        ". downgrade: driver+cuda_toolkit: NVIDIA driver 550.127.05" in line for line in lines
    )
    assert any(line.startswith("5 hosts: nothing to do: gpu-41, gpu-42") for line in lines)
    assert "2 hosts: unreachable: connection refused: gpu-49, gpu-50" in lines
    assert lines[-2] == "50 hosts: 40 to change (40 reboots, 10 downgrades), 3 refused, 2 not read"
    assert "--show-commands" in lines[-1]


def test_show_commands_prints_every_hosts_commands_before_the_summary() -> None:
    outcomes = fleet()
    text, _ = confirm_text(outcomes, show_commands=True)
    for o in outcomes.values():
        for change in o.value.changes if o.value else ():
            for step in change.steps:
                assert step.shown() in text
    assert text.count("gpu-17: ") == 1  # its own full plan; the summary names it in a group


def test_a_fleet_of_different_plans_still_fits() -> None:
    fresh = plan_host(host_from(STACK), fresh_facts(), probes=NO_SYSTEMD)

    # every host its own plan: refused each for its own reason, or a different subset
    def plan(i: int) -> HostPlan:
        if i % 2:
            return replace(fresh, host=f"h{i}", changes=fresh.changes[: 1 + i % 12])
        return HostPlan(f"h{i}", refused=f"the disk of h{i} is full")

    outcomes = {f"h{i}": Outcome(f"h{i}", "ok", value=plan(i)) for i in range(50)}
    text, _ = confirm_text(outcomes)
    lines = text.splitlines()
    assert rows(lines) + PROMPT_LINES <= 24, text
    assert any(line.startswith("... ") and "other plans" in line for line in lines), text
