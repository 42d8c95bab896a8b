"""Where a converged one-host `gpunode apply` spends its time, phase by phase.

    python -m bench.onehost [--runs 7] [--tree NAME=PATH ...]

A one-host lab of its own (state in a temporary folder, addresses 127.0.67.X), converged
once. Then each tree (a checkout of gpunode: `--tree before=/tmp/old --tree after=.`; the
installed gpunode when none is given) runs `gpunode apply --yes --json` (as the installed
command does: `python -c`, not `python -m`; run records in a state folder of the
benchmark's own, empty at its start), with and without
smoke tests, RUNS times, the trees and modes alternating so that noise hits them alike.
Each event's arrival is timed from the command's start (stdout unbuffered, read line by
line), and the phases are the gaps between these milestones:

- start-up: Python, imports, the inventory read and validated (up to `run-started`);
- connect: TCP, SSH handshake, public-key authentication (`host-connected`);
- facts: the host's lock taken (the connection's first session), then the facts session,
  the host's own script included (`facts-gathered`);
- plan: resolving versions and planning (`plan-ready`);
- smoke: the smoke session (the last `smoke-result`);
- exit: the run record, closing the connection, the process's exit.

Prints medians (ms) and each run's controller CPU. Needs root (the lab).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.latency import gpunode

NET = "67"
# What the `gpunode` command that pip installs runs (`python -m gpunode` costs more)
AS_INSTALLED = "import sys; from gpunode.cli import run; sys.argv[0] = 'gpunode'; sys.exit(run())"
MILESTONES = ("run-started", "host-connected", "facts-gathered", "plan-ready", "smoke-result")
PHASES = ("start-up", "connect", "facts", "plan", "smoke", "exit")


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def one_apply(env: dict[str, str], inventory: Path, smoke: bool) -> dict[str, float]:
    """Milliseconds per phase of one converged apply, and its CPU."""
    argv = [sys.executable, "-c", AS_INSTALLED, "apply", str(inventory), "--yes", "--json"]
    if not smoke:
        argv.append("--no-smoke")
    seen: dict[str, float] = {}
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    # cwd: `python -c` puts the working directory ahead of PYTHONPATH, where a tree is
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True, cwd=inventory.parent)
    assert proc.stdout is not None
    last = ""
    for line in proc.stdout:
        at = time.perf_counter() - t0
        last = line
        try:
            event = json.loads(line).get("event")
        except ValueError:
            continue
        if event in MILESTONES:  # the last of each: smoke-result comes once per check
            seen[event] = at
    proc.wait()  # stdout closes early in the interpreter's exit: the process's end counts
    end = time.perf_counter() - t0
    recap = json.loads(last)
    if proc.returncode != 0 or recap.get("event") != "recap" or recap["hosts"][0]["changed"]:
        raise SystemExit(f"the converged apply changed something or failed:\n{last}")
    out: dict[str, float] = {"cpu": (children_cpu() - cpu0) * 1000, "total": end * 1000}
    before = 0.0
    for phase, milestone in zip(PHASES, (*MILESTONES, None), strict=True):
        at = seen.get(milestone, before) if milestone else end
        out[phase] = (at - before) * 1000
        before = at
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--net", default=NET, help="the lab's --net (another lab's: 323 = 127.1.67.X)")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) or {"installed": ""}
    with tempfile.TemporaryDirectory(prefix="gpunode-onehost-") as tmp:
        env = {**os.environ, "GPUNODE_LAB_DIR": str(Path(tmp) / "lab"), "PYTHONUNBUFFERED": "1",
               "GPUNODE_STATE_DIR": str(Path(tmp) / "state")}  # fmt: skip
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
        gpunode(env, "lab", "up", "--hosts", "1", "--net", args.net)
        try:
            inventory = Path(tmp) / "lab.yaml"
            inventory.write_text(gpunode(env, "lab", "inventory"))
            gpunode(env, "apply", str(inventory), "--yes", "--no-tui")
            samples: dict[tuple[str, bool], list[dict[str, float]]] = {}
            for _ in range(args.runs + 1):  # the first round warms the bytecode caches
                for name, path in trees.items():
                    tree_env = {**env, "PYTHONPATH": str(Path(path).resolve())} if path else env
                    for smoke in (False, True):
                        samples.setdefault((name, smoke), []).append(
                            one_apply(tree_env, inventory, smoke)
                        )
        finally:
            gpunode(env, "lab", "down")
    report({k: v[1:] for k, v in samples.items()}, args.runs)


def report(samples: dict[tuple[str, bool], list[dict[str, float]]], runs: int) -> None:
    cols = list(samples)
    print(f"medians of {runs} runs, ms\n")
    heads = [f"{name}, {'smoke' if smoke else 'no smoke'}" for name, smoke in cols]
    print("| phase | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(cols))
    for phase in (*PHASES, "total", "cpu"):
        cells = [f"{statistics.median(s[phase] for s in samples[c]):.0f}" for c in cols]
        label = {"total": "**wall**", "cpu": "controller CPU"}.get(phase, phase)
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
