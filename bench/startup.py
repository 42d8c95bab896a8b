"""Start-up time of the `gpunode` command line.

    python bench/startup.py [--runs 21]

Times `gpunode --help` and `gpunode --version` against a bare `python -c pass`, side by
side in one run, and prints medians. Target: `gpunode --help` <= 0.3 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "gpunode --version": [sys.executable, "-m", "gpunode", "--version"],
    "gpunode --help": [sys.executable, "-m", "gpunode", "--help"],
    "gpunode check --help": [sys.executable, "-m", "gpunode", "check", "--help"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.runs):  # interleaved, so that noise hits every case alike
        for name, argv in CASES.items():
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<24}{'median s':>10}{'over python':>14}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<24}{med:>10.3f}{med - base:>14.3f}")


if __name__ == "__main__":
    main()
