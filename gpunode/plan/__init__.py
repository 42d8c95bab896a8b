"""The planner: desired state (inventory + roles) minus facts -> typed changes."""

from __future__ import annotations

from typing import Any

from gpunode.plan.change import Change, HostPlan, Step

__all__ = ["Change", "HostPlan", "Step", "managed_paths", "plan_host", "probes_for"]


def __getattr__(name: str) -> Any:
    # The planner imports the operations, which import Change from here: load it lazily.
    if name in ("managed_paths", "plan_host", "probes_for"):
        from gpunode.plan import planner

        return getattr(planner, name)
    raise AttributeError(name)
