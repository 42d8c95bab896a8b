"""`gpunode envs`: each host's conda envs as installed, in plain text or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpunode.safetext import printable

if TYPE_CHECKING:
    from gpunode.facts.envexport import EnvExport
    from gpunode.hostpool import Outcome


def envs_json(outcomes: dict[str, Outcome[list[EnvExport]]]) -> dict[str, Any]:
    """{"hosts": {name: {status, seconds, envs?, error?}}}."""
    doc: dict[str, Any] = {}
    for name, o in outcomes.items():
        entry: dict[str, Any] = {"status": o.state, "seconds": round(o.seconds, 3)}
        if o.value is not None:
            entry["envs"] = [e.model_dump(mode="json") for e in o.value]
        if o.error:
            entry["error"] = o.error
        doc[name] = entry
    return {"hosts": doc}


def envs_text(outcomes: dict[str, Outcome[list[EnvExport]]]) -> str:
    """Each env's export under a `# host: env (path)` line."""
    parts = []
    for name, o in outcomes.items():
        if o.value is None:
            parts.append(f"# {name}: {o.status.upper()}: {o.error}\n")
        elif not o.value:
            parts.append(f"# {name}: no conda envs\n")
        for env in o.value or []:
            head = f"# {name}: {env.name} ({env.path})\n"
            body = env.export if env.error is None else f"# export failed: {env.error}\n"
            parts.append(head + body)
    return printable("\n".join(parts), lines=True)
