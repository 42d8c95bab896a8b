"""The executor: runs each host's plan over its transport and reports through events."""

from gpunode.execute.host import HostRun, Options
from gpunode.execute.result import ChangeResult, HostResult, RunResult
from gpunode.execute.run import apply

__all__ = ["ChangeResult", "HostResult", "HostRun", "Options", "RunResult", "apply"]
