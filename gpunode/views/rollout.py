"""The plain view of a rolling upgrade's own steps: waves, and each host's phase."""

from __future__ import annotations

from typing import TextIO

from gpunode.events import Event, RolloutPhase, RolloutWave
from gpunode.safetext import printable

SAYS = {
    "draining": "draining its node",
    "waiting": "waiting for {detail}",
    "applying": "applying",
    "restarting": "restarting its node daemon (the driver is loaded)",
    "verifying": "verifying: doctor, the node back with its GPUs",
    "resumed": "resumed: back in service",
    "failed": "FAILED, left drained: {detail}",
    "untouched": "untouched: {detail}",
}


class RolloutPrinter:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, e: Event) -> None:
        if isinstance(e, RolloutWave):
            what = "canary" if e.canary else f"wave {e.wave}"
            hosts = ", ".join(printable(h) for h in e.hosts)
            self.out.write(f"== {what}: {hosts}\n")
        elif isinstance(e, RolloutPhase):
            text = SAYS[e.phase].format(detail=printable(e.detail) or "its jobs")
            self.out.write(f"{printable(e.host)}: {text}\n")
        else:
            return
        self.out.flush()


def summary(ends: dict[str, tuple[str, str]], record: str) -> str:
    """One line per host (its last phase and why), and the record."""
    width = max((len(h) for h in ends), default=4)
    lines = [f"{printable(h):<{width}}  {phase}{f': {printable(why)}' if why else ''}"
             for h, (phase, why) in ends.items()]  # fmt: skip
    return "\n".join([*lines, f"rollout record: {record}"])
