"""A probe: a shell check an operation needs, run with the facts. Its own small module: a
host's first read builds the probes it remembers (execute/firstask.py) before the
operations are imported."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """A shell check whose exit status (0 = true) an operation needs."""

    key: str
    command: str
    role_shell: bool = False
    """Shell a role wrote (a command's `unless:`), not gpunode: it runs only when the host
    is applied and not refused, never for `plan` or `apply --check` (unless the task says
    `check_mode_probe: true`)."""
