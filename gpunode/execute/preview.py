"""Read and plan hosts without changing them: `plan`, and `apply`'s confirmation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpunode.events import Bus
from gpunode.execute import warm
from gpunode.execute.host import HostRun, Options
from gpunode.hostpool import Outcome, run_hosts
from gpunode.transport.base import Transport
from gpunode.transport.connect import module_for
from gpunode.transport.secret import Secret

if TYPE_CHECKING:
    from gpunode.changes import HostPlan
    from gpunode.inventory.model import Host


def plan_hosts(
    hosts: Sequence[Host],
    options: Options,
    *,
    bus: Bus | None = None,
    forks: int | None = None,
    become_password: Secret | None = None,
) -> dict[str, Outcome[HostPlan]]:
    """Each host's plan, one read round trip per host; nothing is written."""
    events = bus or Bus()
    warm.start(module_for(h) for h in hosts)

    def work(transport: Transport, host: Host) -> HostPlan:
        return HostRun(transport, host, events, options).read()[1]

    return run_hosts(hosts, work, bus=events, forks=forks, become_password=become_password)
