"""The planner: desired state (inventory + roles) minus facts -> typed changes."""

from gpunode.plan.planner import managed_paths, plan_host, probes_for

__all__ = ["managed_paths", "plan_host", "probes_for"]
