"""Read every host for the doctor: the facts' round trip, then the probe's, in parallel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpunode.doctor.inputs import Inputs
from gpunode.doctor.model import Finding, health
from gpunode.doctor.probe import parse_probe, probe_command, script
from gpunode.doctor.rules import diagnose
from gpunode.events import Bus
from gpunode.exitcodes import ExitCode, exit_code_for, worst
from gpunode.facts.gather import gather
from gpunode.transport.base import Transport, TransportError

if TYPE_CHECKING:
    from gpunode.hostpool import Outcome
    from gpunode.inventory.model import Host
    from gpunode.transport.secret import Secret


@dataclass(frozen=True)
class Diagnosis:
    host: str
    findings: list[Finding]


def probe(transport: Transport, host: Host, timeout: float = 120.0) -> Inputs:
    """The host's facts and probe, read in two round trips."""
    facts = gather(transport, host, timeout=timeout)
    prefixes = [host.stack.conda.prefix] if host.stack.conda is not None else []
    res = transport.run(probe_command(prefixes), stdin=script(), timeout=timeout)
    if "### end" not in res.stdout and not res.ok:
        raise TransportError(f"doctor probe failed (exit {res.exit_code}): {res.stderr.strip()}")
    return Inputs(host, facts, parse_probe(res.whole_stdout))


def diagnose_all(
    hosts: Sequence[Host],
    *,
    bus: Bus,
    forks: int | None = None,
    become_password: Secret | None = None,
    inventory: str | None = None,
) -> dict[str, Outcome[Diagnosis]]:
    """Each host's findings; their fixes name `inventory` in the gpunode commands."""
    from gpunode.hostpool import run_hosts

    def work(transport: Transport, host: Host) -> Diagnosis:
        return Diagnosis(host.name, diagnose(probe(transport, host), inventory=inventory))

    return run_hosts(hosts, work, bus=bus, forks=forks, become_password=become_password)


def exit_status(outcomes: dict[str, Outcome[Diagnosis]]) -> ExitCode:
    """A host not read ranks first (6, 2, 3), then an error found (10), then a warning (9)."""
    codes: list[int] = [exit_code_for([o.state]) for o in outcomes.values()]
    for o in outcomes.values():
        word = health(o.value.findings) if o.value is not None else "healthy"
        codes.append({"error": ExitCode.DOCTOR_ERROR, "warning": ExitCode.DOCTOR_WARNING}.get(
            word, ExitCode.OK))  # fmt: skip
    return worst(codes)
