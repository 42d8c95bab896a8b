"""gpunode on a fleet of lab hosts: the scale curve, and 10 % of the fleet blackholed.

    sudo python -m bench.fleet                                   # 1,10,50,100,200 hosts
    sudo python -m bench.fleet --hosts 1,10 --runs 3 --stall-pct 0   # a quick look

One lab of the largest size (its own state dir and loopback range); each size is an
inventory of the first N hosts. The stack is the CUDA environment only, so the figures
are gpunode's own cost (connect, facts, plan, one file written, the record) and not apt's.
For each size: converged no-op runs, and one-change runs (the managed profile removed
from every host beforehand). Then, on the largest size, the same one-change run with every
tenth host stalled (it accepts TCP and never speaks): the run must cost about one
connect timeout more than the healthy one, not one per stalled host; the exit code, each
host's status and the profile on every host's disk are checked.

Each run is one `gpunode apply --yes --json` process, sampled every 20 ms from /proc:
peak RSS and open file descriptors; CPU seconds come from the kernel's accounting of the
child. Results go to a JSON file; the table printed at the end is the one in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.compare.lab import Lab

REPO = Path(__file__).resolve().parents[1]
PROFILE = "/etc/profile.d/gpunode-cuda.sh"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__)
    p.add_argument("--hosts", type=_ints, default=[1, 10, 50, 100, 200])
    p.add_argument("--runs", type=int, default=5, help="runs per size and scenario")
    p.add_argument("--stall-pct", type=int, default=10, help="hosts stalled in the fault run")
    p.add_argument("--connect-timeout", type=int, default=10)
    p.add_argument("--state", type=Path, default=Path("/var/tmp/gpunode-fleet"))
    p.add_argument("--net", type=int, default=91, help="lab addresses 127.0.NET.x")
    p.add_argument("--out", type=Path, default=None, help="results JSON (default: STATE/...)")
    p.add_argument("--keep", action="store_true", help="leave the lab running")
    return p.parse_args(argv)


def inventory(lab: Lab, path: Path, names: list[str], connect_timeout: int) -> Path:
    """The lab's inventory cut to `names`, with only the CUDA environment in the stack."""
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(lab.gpunode("lab", "inventory"))
    doc["defaults"]["ssh"]["connect_timeout"] = connect_timeout
    stack = doc["defaults"]["stack"]
    for key in ("driver", "cuda", "cudnn", "nccl"):
        stack[key] = None
    stack["smoke"] = []
    hosts = doc["groups"]["lab"]["hosts"]
    for name in [n for n in hosts if n not in names]:
        del hosts[name]
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


class Sampler(threading.Thread):
    """Peak RSS and open descriptors of one process, read from /proc every 20 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_rss_kib, self.peak_fds = pid, 0, 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_rss_kib = max(self.peak_rss_kib, int(line.split()[1]))
                self.peak_fds = max(self.peak_fds, len(os.listdir(f"/proc/{self.pid}/fd")))
            except (OSError, ValueError):
                pass
            self.stop.wait(0.02)


def apply(lab: Lab, inv: Path) -> dict[str, Any]:
    """One `gpunode apply`, measured; its exit code and each host's final status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json"],
        env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    sampler = Sampler(proc.pid)
    sampler.start()
    out, err = proc.communicate(timeout=900)
    wall = time.monotonic() - start
    sampler.stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    hosts: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            ev = json.loads(line)
            ev = ev.get("data", ev) if ev.get("kind") == "event" else ev
            if ev.get("event") == "host-finished":
                hosts[ev["host"]] = (ev["status"], ev.get("message", ""))
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "peak_rss_mib": sampler.peak_rss_kib / 1024,
        "peak_fds": sampler.peak_fds,
        "hosts": hosts,
        "stderr_tail": err[-800:],
    }


def profile_on(lab: Lab, name: str) -> bool:
    return (lab.dir / "disk" / "hosts" / name / "upper" / PROFILE.lstrip("/")).is_file()


def median_row(n: int, scenario: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    return {
        "hosts": n, "scenario": scenario, "n": len(runs),
        "wall_s": med("wall_s"), "min_s": min(r["wall_s"] for r in runs),
        "max_s": max(r["wall_s"] for r in runs), "cpu_s": med("cpu_s"),
        "peak_rss_mib": med("peak_rss_mib"), "peak_fds": med("peak_fds"),
        "rcs": sorted({r["rc"] for r in runs}),
    }  # fmt: skip


def check_healthy(lab: Lab, names: list[str], res: dict[str, Any]) -> list[str]:
    bad = [n for n in names if res["hosts"].get(n, ("?",))[0] not in ("ok", "changed")]
    bad += [n for n in names if not profile_on(lab, n)]
    return bad


def fault_run(lab: Lab, inv: Path, names: list[str], pct: int) -> dict[str, Any]:
    """The one-change run with every (100/pct)th host stalled; checked on the disks."""
    step = max(1, round(100 / pct))
    stalled = names[step - 1 :: step]
    lab.drift(names, PROFILE)
    for n in stalled:
        lab.gpunode("lab", "fault", n, "stall")
    try:
        res = apply(lab, inv)
    finally:
        for n in stalled:
            lab.gpunode("lab", "fault", n, "stall", "--off")
    healthy = [n for n in names if n not in stalled]
    problems = check_healthy(lab, healthy, res)
    for n in stalled:
        status, message = res["hosts"].get(n, ("missing", ""))
        if status != "unreachable" or "no SSH banner" not in message:
            problems.append(f"{n}: {status} {message}")
        if profile_on(lab, n):
            problems.append(f"{n}: stalled, yet the profile was written")
    if res["rc"] != 3:
        problems.append(f"exit {res['rc']}, 3 expected")
    res.update(stalled=len(stalled), problems=problems)
    return res


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| hosts | run | n | wall s (median) | min-max s | CPU s | CPU ms/host "
        "| peak RSS MiB | open fds | exit |\n|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['hosts']} | {r['scenario']} | {r['n']} | {r['wall_s']:.2f} "
        f"| {r['min_s']:.2f}-{r['max_s']:.2f} | {r['cpu_s']:.2f} "
        f"| {1000 * r['cpu_s'] / r['hosts']:.0f} | {r['peak_rss_mib']:.0f} "
        f"| {r['peak_fds']:.0f} | {','.join(map(str, r['rcs']))} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.state.mkdir(parents=True, exist_ok=True)
    out = args.out or args.state / "fleet-results.json"
    lab = Lab(args.state / "lab", args.net)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    meta = {"commit": commit, "cpus": os.cpu_count(), "machine": platform.platform(),
            "loadavg_start": os.getloadavg(), "argv": sys.argv}  # fmt: skip
    biggest = max(args.hosts)
    t0 = time.monotonic()
    lab.up(biggest)
    meta["lab_up_s"] = time.monotonic() - t0
    names = lab.names()
    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {"meta": meta, "rows": rows}
    try:
        first = apply(lab, inventory(lab, args.state / "all.yaml", names, args.connect_timeout))
        if bad := check_healthy(lab, names, first):
            raise SystemExit(f"the first apply did not converge: {bad[:5]} {first['stderr_tail']}")
        for n in args.hosts:
            sub = names[:n]
            inv = inventory(lab, args.state / f"hosts-{n}.yaml", sub, args.connect_timeout)
            noop = [apply(lab, inv) for _ in range(args.runs)]
            change = []
            for _ in range(args.runs):
                lab.drift(sub, PROFILE)
                res = apply(lab, inv)
                if bad := check_healthy(lab, sub, res):
                    raise SystemExit(f"{n} hosts, one change: not converged: {bad[:5]}")
                change.append(res)
            rows += [median_row(n, "no-op", noop), median_row(n, "one change", change)]
            print(table(rows[-2:]), flush=True)
        if args.stall_pct:
            inv = args.state / f"hosts-{biggest}.yaml"
            faults = [fault_run(lab, inv, names, args.stall_pct) for _ in range(args.runs)]
            row = median_row(biggest, f"one change, {args.stall_pct} % stalled", faults)
            row["problems"] = [p for f in faults for p in f["problems"]]
            row["stalled"] = faults[0]["stalled"]
            rows.append(row)
        meta["loadavg_end"] = os.getloadavg()
    finally:
        out.write_text(json.dumps(results, indent=1, default=str) + "\n")
        if not args.keep:
            lab.down()
    print(table(rows))
    print(json.dumps(meta))
    fault_rows = [r for r in rows if "problems" in r]
    for r in fault_rows:
        print(f"fault run: {r['stalled']} stalled of {r['hosts']}, problems: {r['problems']}")
    return 1 if any(r["problems"] for r in fault_rows) else 0


if __name__ == "__main__":
    sys.exit(main())
