"""The comparison's table: medians per cell, side by side, written into docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import statistics
from pathlib import Path
from typing import Any

BEGIN = "<!-- bench:compare:begin -->"
END = "<!-- bench:compare:end -->"
SCENARIO_NAMES = {"cold": "cold apply", "noop": "converged no-op", "change": "one change"}


def machine() -> dict[str, Any]:
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "os": platform.freedesktop_os_release().get("PRETTY_NAME", "")
        if hasattr(platform, "freedesktop_os_release")
        else "",
    }


def cells(runs: list[dict[str, Any]]) -> dict[tuple[int, int, str, str], dict[str, Any]]:
    """(hosts, latency, scenario, tool) -> medians over the cell's runs."""
    groups: dict[tuple[int, int, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        key = (r["hosts"], r["latency_ms"], r["scenario"], r["tool"])
        groups.setdefault(key, []).append(r)
    out = {}
    for key, rs in groups.items():
        out[key] = {
            "n": len(rs),
            "wall_s": statistics.median(r["wall_s"] for r in rs),
            "wall_min": min(r["wall_s"] for r in rs),
            "wall_max": max(r["wall_s"] for r in rs),
            "cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "maxrss_mib": statistics.median(r["maxrss_mib"] for r in rs),
            "sessions": statistics.median(r["sessions_per_host"] for r in rs),
            "connections": statistics.median(r["connections_per_host"] for r in rs),
            "ok": all(r["rc"] == 0 and r.get("converged", True) for r in rs),
        }
    return out


def _ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "-"
    return f"{b / a:.1f}x"


def table(runs: list[dict[str, Any]]) -> str:
    c = cells(runs)
    tools = [t for t in ("gpunode", "pyinfra", "ansible") if any(k[3] == t for k in c)]
    head = ["hosts", "latency", "run", "tool", "n", "wall s", "min-max s", "CPU s"]
    head += ["peak RSS MiB"]
    head += ["SSH sessions/host", "conns/host", "gpunode faster by"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = {"cold": 0, "noop": 1, "change": 2}
    keys = sorted({k[:3] for k in c}, key=lambda k: (k[0], k[1], order.get(k[2], 9)))
    for hosts, latency, scenario in keys:
        base = c.get((hosts, latency, scenario, "gpunode"))
        for tool in tools:
            m = c.get((hosts, latency, scenario, tool))
            if m is None:
                continue
            speed = "" if tool == "gpunode" or base is None else _ratio(base["wall_s"], m["wall_s"])
            flag = "" if m["ok"] else " (failed)"
            lines.append(
                f"| {hosts} | {latency} ms | {SCENARIO_NAMES.get(scenario, scenario)} | "
                f"{tool}{flag} | {m['n']} | {m['wall_s']:.2f} | "
                f"{m['wall_min']:.1f}-{m['wall_max']:.1f} | {m['cpu_s']:.2f} | "
                f"{m['maxrss_mib']:.0f} | {m['sessions']:.1f} | {m['connections']:.1f} | "
                f"{speed} |"
            )
    return "\n".join(lines) + "\n"


def block(runs: list[dict[str, Any]], started: str, commits: list[str]) -> str:
    m = machine()
    what = f"gpunode {', '.join(commits)}, " if commits else ""
    return (
        f"{BEGIN}\n"
        f"Measured {started}, {what}on {m['os']}, kernel {m['kernel']}, {m['nproc']} CPUs, "
        f"{m['memory_gib']} GiB memory, Python {m['python']}.\n\n"
        f"{table(runs)}"
        f"{END}\n"
    )


def write_doc(
    doc: Path, runs: list[dict[str, Any]], started: str, commits: list[str] | None = None
) -> None:
    replace_block(doc, block(runs, started, commits or []), BEGIN, END)


def replace_block(doc: Path, new: str, begin: str, end: str) -> None:
    """Put `new` (from `begin` to `end`) where the doc has them, or at its end: the text
    around the generated block is left as it was."""
    text = doc.read_text() if doc.exists() else ""
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        text = before + new + after
    else:
        text = text + ("\n" if text else "") + new
    doc.write_text(text)


def main(argv: list[str]) -> int:
    """`python -m bench.compare.report DOC RESULTS.json[:SCENARIOS]...`: one table from
    several runs; `results.json:noop,change` takes only those runs of that file."""
    import json

    if len(argv) < 2:
        print("usage: python -m bench.compare.report DOC RESULTS.json[:SCENARIOS]...")
        return 2
    runs: list[dict[str, Any]] = []
    started = []
    commits: list[str] = []
    for arg in argv[1:]:
        path, _, only = arg.partition(":")
        doc = json.loads(Path(path).read_text())
        keep = set(only.split(",")) if only else None
        runs += [r for r in doc["runs"] if keep is None or r["scenario"] in keep]
        started.append(doc["started"])
        if doc.get("commit") and doc["commit"] not in commits:
            commits.append(doc["commit"])
    write_doc(Path(argv[0]), runs, " to ".join(sorted({started[0], started[-1]})), commits)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
