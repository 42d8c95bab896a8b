"""Each conda env of a host as installed: `conda env export`, all envs in one round trip."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from gpunode.events import Bus, HostStatusChanged
from gpunode.facts.gather import gather
from gpunode.facts.model import HostFacts
from gpunode.transport.base import Transport

if TYPE_CHECKING:
    from gpunode.hostpool import Outcome
    from gpunode.inventory.model import Host
    from gpunode.transport.secret import Secret

MARK = "### gpunode-env "


class EnvExport(BaseModel):
    """One env as `conda env export` writes it (YAML), or why it could not."""

    model_config = ConfigDict(extra="forbid")
    name: str
    path: str
    export: str = Field("", description="`conda env export -p PATH` as conda printed it.")
    error: str | None = Field(None, description="conda's error when the export failed.")


def export_command(prefix: str, paths: Sequence[str]) -> str:
    """One shell line: each env's export after a marker line naming it, then its status."""
    conda = shlex.quote(f"{prefix}/bin/conda")
    parts = [
        f"echo {shlex.quote(MARK + p)}; {conda} env export -p {shlex.quote(p)} 2>&1;"
        f' echo "{MARK}rc $?"'
        for p in paths
    ]
    return "; ".join(parts) or "true"


def parse_exports(facts: HostFacts, stdout: str) -> list[EnvExport]:
    names = {e.path: e.name for e in facts.conda.envs}
    out: list[EnvExport] = []
    path, lines = "", []  # type: tuple[str, list[str]]
    for line in stdout.splitlines():
        if line.startswith(MARK + "rc "):
            text = "\n".join(lines).strip("\n") + "\n"
            ok = line.removeprefix(MARK + "rc ").strip() == "0"
            out.append(
                EnvExport(
                    name=names.get(path, path.rsplit("/", 1)[-1]),
                    path=path,
                    export=text if ok else "",
                    error=None if ok else text.strip(),
                )
            )
        elif line.startswith(MARK):
            path, lines = line.removeprefix(MARK), []
        else:
            lines.append(line)
    return out


def export_envs(transport: Transport, host: Host, timeout: float = 300.0) -> list[EnvExport]:
    """The host's conda envs (from its facts), each exported as installed."""
    facts = gather(transport, host)
    if facts.conda.prefix is None or not facts.conda.envs:
        return []
    paths = [e.path for e in facts.conda.envs]
    res = transport.run(export_command(facts.conda.prefix, paths), timeout=timeout)
    return parse_exports(facts, res.whole_stdout)


def export_all(
    hosts: Sequence[Host],
    *,
    bus: Bus,
    forks: int | None = None,
    become_password: Secret | None = None,
) -> dict[str, Outcome[list[EnvExport]]]:
    from gpunode.hostpool import run_hosts

    def work(transport: Transport, host: Host) -> list[EnvExport]:
        bus.emit(HostStatusChanged(host.name, status="gathering"))
        return export_envs(transport, host)

    return run_hosts(hosts, work, bus=bus, forks=forks, become_password=become_password)
