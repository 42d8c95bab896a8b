"""The fleet benchmark, small: two sizes, one run each, one host of two stalled.

Not a timed assertion: it checks that the harness runs, that the fault run it reports
found the stalled host unreachable and the other converged (checked on the hosts' disks
by the harness), and that it writes its table and results.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import lab_unavailable, slot_net, slot_path

REPO = Path(__file__).resolve().parents[2]
STATE = slot_path("/var/tmp/gpunode-fleet-smoke")

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_the_fleet_benchmark_runs_and_checks_the_stalled_hosts() -> None:
    if reason := lab_unavailable():
        pytest.skip(reason)
    out = STATE / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.fleet", "--hosts", "1,2", "--runs", "1",
         "--stall-pct", "50", "--connect-timeout", "3", "--state", str(STATE),
         "--net", str(slot_net(92)), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["hosts"], r["scenario"]) for r in rows] == [
        (1, "no-op"), (1, "one change"), (2, "no-op"), (2, "one change"),
        (2, "one change, 50 % stalled"),
    ]  # fmt: skip
    fault = rows[-1]
    assert fault["stalled"] == 1 and fault["problems"] == [] and fault["rcs"] == [3]
    assert fault["wall_s"] >= 3  # the stalled host's connect timeout was waited out
    assert "| 2 | one change, 50 % stalled | 1 |" in proc.stdout
