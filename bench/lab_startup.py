"""How long `gpunode lab up --hosts N` and `gpunode lab down` take, and what a host costs.

    python bench/lab_startup.py [--hosts 50] [--runs 3]

Runs in its own state directory and address range (127.0.66.X), so it never meets
another lab. Prints medians; memory per host is the hosts' processes' PSS summed from
/proc/PID/smaps_rollup, divided by the number of hosts. Needs root on Linux.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def gpunode(state: Path, *args: str) -> None:
    env = {**os.environ, "GPUNODE_LAB_DIR": str(state)}
    subprocess.run(
        [sys.executable, "-m", "gpunode", "lab", *args],
        env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def lab_pss_kib(state: Path) -> int:
    """PSS of every process whose command line names this lab's state directory."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if str(state) not in cmd:
                continue
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    ups, downs, mem = [], [], []
    with tempfile.TemporaryDirectory(prefix="gpunode-lab-bench-") as tmp:
        state = Path(tmp) / "lab"
        gpunode(state, "up", "--hosts", "1", "--net", "66")  # build the repository once
        gpunode(state, "down")
        for _ in range(args.runs):
            t0 = time.perf_counter()
            gpunode(state, "up", "--hosts", str(args.hosts), "--net", "66")
            ups.append(time.perf_counter() - t0)
            time.sleep(1)
            mem.append(lab_pss_kib(state) / args.hosts / 1024)
            t0 = time.perf_counter()
            gpunode(state, "down")
            downs.append(time.perf_counter() - t0)
    print(f"hosts: {args.hosts}, runs: {args.runs}, cores: {os.cpu_count()}")
    print(f"up    median {statistics.median(ups):.2f} s  ({', '.join(f'{u:.2f}' for u in ups)})")
    print(f"down  median {statistics.median(downs):.2f} s  "
          f"({', '.join(f'{d:.2f}' for d in downs)})")  # fmt: skip
    print(f"memory per host (PSS) median {statistics.median(mem):.1f} MiB")


if __name__ == "__main__":
    main()
