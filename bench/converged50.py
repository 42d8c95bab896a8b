"""Controller CPU of a converged apply on 50 lab hosts, trees side by side.

    python -m bench.converged50 [--runs 5] [--hosts 50] [--net 68] [--one] --tree NAME=PATH ...

A lab of its own (state in a temporary folder, 127.0.NET.X), one cold apply, then for
each tree (a gpunode checkout: `git worktree add /tmp/before COMMIT`) `gpunode apply
--yes --json --no-smoke` on the converged hosts, the trees alternating run by run; the
first round is dropped (bytecode). CPU is `RUSAGE_CHILDREN` of the command's process.
`--one`: each round also applies each tree to the first host alone (`--limit`), so the CPU
per host past the first, (all - one) / (hosts - 1), comes from the same run. Prints each
run with the machine's load average, and the medians. Needs root (the lab).
`--pin`: the lab's hosts (their sshd and every session) on CPUs 1 and up, each measured
command on CPU 0 alone, so its CPU time is not inflated by fifty hosts' sessions sharing
its core, as a controller's is not when its hosts are other machines.
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


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--net", default="68")
    ap.add_argument("--one", action="store_true", help="also time the first host alone")
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--pin", action="store_true", help="controller on CPU 0, hosts on the rest")
    args = ap.parse_args()
    ncpu = os.cpu_count() or 1
    if args.pin and ncpu < 2:
        ap.error("--pin needs 2 CPUs or more")
    hosts_cpus = f"1-{ncpu - 1}" if args.pin else None
    trees = dict(t.split("=", 1) for t in args.tree)
    with tempfile.TemporaryDirectory(prefix="gpunode-converged50-") as tmp:
        env = {**os.environ, "GPUNODE_LAB_DIR": str(Path(tmp) / "lab")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)

        def gpunode(
            *argv: str, e: dict[str, str] = env, cpus: str | None = None
        ) -> subprocess.CompletedProcess[str]:
            cmd = [sys.executable, "-m", "gpunode", *argv]
            if cpus is not None:  # the process and all it starts (the lab: sshd, sessions)
                cmd = ["taskset", "-c", cpus, *cmd]
            return subprocess.run(cmd, env=e, text=True, capture_output=True, cwd=tmp)

        up = ("lab", "up", "--hosts", str(args.hosts), "--net", args.net)
        gpunode(*up, cpus=hosts_cpus).check_returncode()
        try:
            inventory = Path(tmp) / "lab.yaml"
            inventory.write_text(gpunode("lab", "inventory").stdout)
            t = time.perf_counter()
            cold = gpunode("apply", str(inventory), "--yes", "--no-tui", "--no-smoke")
            print(f"cold apply: exit {cold.returncode}, {time.perf_counter() - t:.0f} s")
            sizes = {"all": [], "one": ["--limit", "lab-01"]} if args.one else {"all": []}
            samples: dict[tuple[str, str], list[tuple[float, float]]] = {
                (n, s): [] for n in trees for s in sizes
            }
            for i in range(args.runs + 1):
                for size, limit in sizes.items():
                    for name, path in trees.items():
                        e = {**env, "PYTHONPATH": str(Path(path).resolve())}
                        c0, t0 = cpu(), time.perf_counter()
                        r = gpunode("apply", str(inventory), "--yes", "--json", "--no-smoke",
                                    *limit, e=e, cpus="0" if args.pin else None)  # fmt: skip
                        wall, used = time.perf_counter() - t0, cpu() - c0
                        recap = json.loads(r.stdout.splitlines()[-1])
                        changed = sum(h["changed"] for h in recap["hosts"])
                        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
                        print(
                            f"{i} {name} {size}: exit {r.returncode} wall {wall:.2f} s "
                            f"cpu {used:.2f} s changed {changed} load {load}",
                            flush=True,
                        )
                        if i:
                            samples[(name, size)].append((wall, used))
        finally:
            gpunode("lab", "down")
    medians: dict[tuple[str, str], float] = {}
    for (name, size), runs in samples.items():
        w = statistics.median(x[0] for x in runs)
        c = medians[(name, size)] = statistics.median(x[1] for x in runs)
        print(
            f"{name} {size}: median wall {w:.2f} s, controller CPU {c:.2f} s "
            f"({[round(x[1], 2) for x in runs]})"
        )
    if args.one:
        for name in trees:
            per = (medians[(name, "all")] - medians[(name, "one")]) / (args.hosts - 1)
            print(f"{name}: {per * 1000:.1f} ms of controller CPU per host past the first")


if __name__ == "__main__":
    main()
