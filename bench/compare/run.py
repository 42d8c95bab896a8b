"""gpunode vs ansible-core vs pyinfra on the same `gpunode lab` hosts: the whole comparison.

    sudo python -m bench.compare.run                      # the full matrix, docs table
    sudo python -m bench.compare.run --hosts 1 --runs 1 --cold-runs 1 --latency 0

Steps: a venv with the pinned ansible-core and pyinfra; a lab of its own (state dir and
loopback range apart from any other lab); for each lab size, added latency and tool:
cold applies on reset hosts, converged no-op runs, and one-change runs (one managed file
removed from every host beforehand). Each run is measured by bench/compare/measure.py;
SSH connections and session channels are counted from the hosts' sshd logs; after each
cold run every host's dpkg database, holds and files are checked against the stack.
Results go to a JSON file and, with --doc, into the table of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.compare import report
from bench.compare.lab import Lab, problems
from bench.compare.stack import ENV_PATH, declared
from bench.compare.tools import TOOLS, Target, Tool, ensure_venv
from gpunode_lab.state import net_address

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ("cold", "noop", "change")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _words(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.compare.run", description=__doc__)
    p.add_argument("--hosts", type=_ints, default=[1, 10, 50], help="lab sizes, e.g. 1,10,50")
    p.add_argument("--latency", type=_ints, default=[0, 50], help="added ms per round trip")
    p.add_argument("--tools", type=_words, default=list(TOOLS))
    p.add_argument("--scenarios", type=_words, default=list(SCENARIOS))
    p.add_argument("--runs", type=int, default=5, help="no-op and one-change runs per cell")
    p.add_argument("--cold-runs", type=int, default=5, help="cold runs per cell (at least 1)")
    p.add_argument(
        "--cold-runs-big",
        type=int,
        default=None,
        help="cold runs for labs of 50 hosts and more (default: --cold-runs)",
    )
    p.add_argument("--state", type=Path, default=Path("/var/tmp/gpunode-bench"))
    p.add_argument("--net", type=int, default=77, help="lab addresses 127.0.NET.x")
    p.add_argument("--out", type=Path, default=None, help="results JSON (default: STATE/...)")
    p.add_argument("--doc", type=Path, default=None, help="write the table into this doc")
    p.add_argument("--keep-lab", action="store_true", help="leave the lab running at the end")
    return p.parse_args(argv)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.state: Path = args.state
        self.work = self.state / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.lab = Lab(self.state / "lab", args.net)
        self.venv = self.state / "venv"
        self.runs: list[dict[str, Any]] = []
        self.package_sets: dict[int, tuple[str, dict[str, str]]] = {}
        self.started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        self.commit = _commit()

    def say(self, msg: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def target(self) -> tuple[Target, dict[str, Any]]:
        cfg = self.lab.config()
        inv = self.lab.inventory(self.work / "lab.yaml")
        stack = declared(inv, Path(cfg["repo_dir"]), cfg["ubuntu"])
        stack_json = self.work / "stack.json"
        stack_json.write_text(json.dumps(stack, indent=2) + "\n")
        names = list(cfg["names"])
        t = Target(
            hosts={n: net_address(int(cfg["net"]), 11 + i) for i, n in enumerate(names)},
            user="ubuntu",
            port=int(cfg["port"]),
            identity=str(self.lab.dir / "client" / "id_ed25519"),
            known_hosts=str(self.lab.dir / "client" / "known_hosts"),
            gpunode_inventory=inv,
            stack_json=stack_json,
        )
        return t, stack

    def measure(self, tool: Tool, t: Target, label: str) -> dict[str, Any]:
        cmd = tool.command(t)
        out = self.work / "measure.json"
        log = self.work / f"{label}.log"
        with log.open("w") as f:
            proc = subprocess.run(
                [sys.executable, "-m", "bench.compare.measure", str(out), "--", *cmd],
                env=tool.run_env(),
                cwd=REPO,
                stdout=f,
                stderr=subprocess.STDOUT,
                check=False,
            )
        control = tool.env.get("ANSIBLE_SSH_CONTROL_PATH_DIR")
        if control:  # a fresh folder per run: its masters are gone, so is it
            shutil.rmtree(control, ignore_errors=True)
        if proc.returncode != 0:
            raise RuntimeError(f"measuring {tool.name} failed; see {log}")
        result: dict[str, Any] = json.loads(out.read_text())
        result["log"] = str(log)
        return result

    def one(
        self, tool: Tool, t: Target, stack: dict[str, Any], scenario: str, latency: int, i: int
    ) -> None:
        names = list(t.hosts)
        n = len(names)
        if scenario == "cold":
            self.lab.reset(names)
            if latency:
                self.lab.latency(names, latency)
        elif scenario == "change":
            self.lab.drift(names, ENV_PATH)
        self.lab.mark(names)
        label = f"{tool.name}-{n}h-{latency}ms-{scenario}-{i}"
        r = self.measure(tool, t, label)
        counts = self.lab.counts(names)
        r.update(
            tool=tool.name,
            hosts=n,
            latency_ms=latency,
            scenario=scenario,
            run=i,
            connections_per_host=statistics.mean(c.connections for c in counts.values()),
            sessions_per_host=statistics.mean(c.sessions for c in counts.values()),
            sessions_max=max(c.sessions for c in counts.values()),
        )
        if scenario != "noop" or i == 0:
            bad = {}
            snaps = self.lab.snapshots(names, stack["expect"]["files"])
            for name in names:
                snap = snaps[name]
                found = problems(snap, stack["expect"])
                if scenario == "cold" and name == names[0]:
                    found += self.same_packages(tool.name, n, snap["packages"])
                if found:
                    bad[name] = found
            r["converged"] = not bad
            if bad:
                r["problems"] = bad
        self.say(
            f"{label}: rc={r['rc']} wall={r['wall_s']:.2f}s cpu={r['cpu_s']:.2f}s"
            f" rss={r['maxrss_mib']:.0f}MiB sessions/host={r['sessions_per_host']:.1f}"
            f" conns/host={r['connections_per_host']:.1f}"
            + ("" if r.get("converged", True) else f" NOT CONVERGED: {r['problems']}")
        )
        self.runs.append(r)
        self.save()

    def same_packages(self, tool: str, n: int, packages: dict[str, str]) -> list[str]:
        """Every tool must leave the same dpkg database (no extra recommends, same deps)."""
        first = self.package_sets.setdefault(n, (tool, packages))
        if first[0] == tool:
            return []
        extra = sorted(set(packages.items()) - set(first[1].items()))
        missing = sorted(set(first[1].items()) - set(packages.items()))
        out = [f"{p}={v} installed, not after {first[0]}" for p, v in extra]
        return out + [f"{p}={v} not installed, unlike after {first[0]}" for p, v in missing]

    def save(self) -> None:
        out = self.args.out or self.state / "results.json"
        doc = {
            "started": self.started,
            "commit": self.commit,
            "machine": report.machine(),
            "runs": self.runs,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1) + "\n")

    def cold_runs(self, n: int) -> int:
        big = self.args.cold_runs_big
        runs: int = big if big is not None and n >= 50 else self.args.cold_runs
        return max(1, runs)

    def run(self) -> None:
        a = self.args
        ensure_venv(self.venv, self.say)
        tools = {name: Tool(name, self.venv, self.work) for name in a.tools}
        try:
            for n in a.hosts:
                self.lab.down()
                self.say(f"lab of {n} hosts")
                self.lab.up(n)
                t, stack = self.target()
                for latency in a.latency:
                    for tool in tools.values():
                        # a cold run always comes first: the other scenarios need converged hosts
                        for i in range(self.cold_runs(n)):
                            self.one(tool, t, stack, "cold", latency, i)
                        for scenario in ("noop", "change"):
                            if scenario in a.scenarios:
                                for i in range(a.runs):
                                    self.one(tool, t, stack, scenario, latency, i)
        finally:
            if not a.keep_lab:
                self.lab.down()
        if a.doc:
            report.write_doc(a.doc, self.runs, self.started, [self.commit])


def _commit() -> str:
    """The gpunode measured: its commit, marked when the tree had changes."""
    git = ["git", "-C", str(REPO)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "unknown"
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    return head.stdout.strip() + ("+changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
