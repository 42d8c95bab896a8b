"""The planner: desired state (inventory + roles) minus facts -> typed changes."""

from gpunode.plan.change import Change, HostPlan, Step
from gpunode.plan.planner import managed_paths, plan_host, probes_for

__all__ = ["Change", "HostPlan", "Step", "managed_paths", "plan_host", "probes_for"]
