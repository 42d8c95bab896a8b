"""What `gpunode upgrade` asks of a workload scheduler around each host (docs/upgrade.md).

A backend takes a node out of service and puts it back: `drain` (no new work, running jobs
go on), `wait_drained` (until nothing runs there, or a timeout), `gres_ok` (the node's
daemon has registered again since a given time, with its GPUs), `resume`, and `fail` (it
stays drained, the reason saying why). Slurm is the one backend (`slurm.py`); Kubernetes
(cordon, drain, uncordon, the device plugin's `nvidia.com/gpu` capacity) fits the same
five calls and is left out until a real cluster can test it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class SchedulerError(Exception):
    """The scheduler refused, or did not answer: the message says which node and why."""


OnWait = Callable[[str], None]
"""Told what a drain still waits for ("job 12") at each poll; it may raise SchedulerError
to stop waiting (the rollout was asked to stop)."""


class Scheduler(Protocol):
    def drain(self, node: str, reason: str) -> None: ...

    def wait_drained(self, node: str, timeout: float, on_wait: OnWait) -> None: ...

    def resume(self, node: str) -> None: ...

    def fail(self, node: str, reason: str) -> None: ...

    def gres_ok(self, node: str, gpus: int | None, since: float) -> str | None:
        """None when the node is back with its GPUs, else what is wrong."""
        ...
