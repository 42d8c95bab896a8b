"""The comparison harness, small: one host, one run of each scenario, for each tool.

Not a timed assertion: it checks that the harness runs every tool to a converged host
(dpkg's database in the host, not what the tools report) and writes a table of numbers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import gpunode_lab, lab_unavailable, slot_net, slot_path

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("GPUNODE_BENCH_STATE") or slot_path("/var/tmp/gpunode-bench-smoke"))
NET = slot_net(78)  # apart from the test lab (127.0.1.X) and the full benchmark's (127.0.77.X)

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture(scope="module")
def venv() -> Path:
    reason = lab_unavailable()
    if reason:
        pytest.skip(reason)
    path = STATE / "venv"
    # in a child: `bench` here would be this test folder, not the repository's bench/
    make = (
        "import pathlib; from bench.compare.tools import ensure_venv;"
        f" ensure_venv(pathlib.Path({str(path)!r}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", make], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        pytest.skip(
            f"ansible-core and pyinfra could not be installed from PyPI: {proc.stderr[-800:]}"
        )
    return path


def test_harness_converges_one_host_with_each_tool(venv: Path, tmp_path: Path) -> None:
    out, doc = tmp_path / "results.json", tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nbefore\n")
    cmd = [sys.executable, "-m", "bench.compare.run", "--hosts", "1", "--latency", "0"]
    cmd += ["--runs", "1", "--cold-runs", "1", "--state", str(STATE), "--net", str(NET)]
    cmd += ["--out", str(out), "--doc", str(doc), "--keep-lab"]
    lab_dir = STATE / "lab"
    try:
        proc = subprocess.run(
            cmd, cwd=REPO, capture_output=True, text=True, timeout=540
        )  # ~1 min on an idle 2-core machine
        assert proc.returncode == 0, proc.stderr[-4000:]
        runs = json.loads(out.read_text())["runs"]
        seen = {(r["tool"], r["scenario"]) for r in runs}
        tools = ("gpunode", "pyinfra", "ansible")
        assert seen == {(t, s) for t in tools for s in ("cold", "noop", "change")}
        for r in runs:
            assert r["rc"] == 0, r
            assert r.get("converged", True), r.get("problems")
            assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["maxrss_mib"] > 0
            assert r["connections_per_host"] >= 1  # counted from the host's sshd log
        # the last tool's work, read from dpkg inside the host
        stack = json.loads((STATE / "work" / "stack.json").read_text())
        status = json.loads(
            gpunode_lab(lab_dir, "status", "--json").stdout,
        )
        pid = status["hosts"][0]["init_pid"]
        query = ["dpkg-query", "-W", "-f", "${Package} ${Version} ${Status}\n"]
        dpkg = subprocess.run(
            ["nsenter", "-t", str(pid), "-m", "-p", "-r", "-w", "--", *query],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        installed = {
            line.split()[0]: line.split()[1]
            for line in dpkg.splitlines()
            if line.endswith(" ok installed")
        }
        for name, version in stack["expect"]["packages"].items():
            assert name in installed, f"{name} not installed in the host"
            assert not version or installed[name] == version
        # the table: one row per tool and scenario, with numbers
        text = doc.read_text()
        assert text.startswith("# Benchmarks\n\nbefore\n")
        rows = [ln for ln in text.splitlines() if re.match(r"\| 1 \| 0 ms \|", ln)]
        assert len(rows) == 9, text
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            numbers = [cells[5], *cells[7:11]]  # wall, CPU, RSS, sessions, connections
            assert all(re.fullmatch(r"\d+(\.\d+)?", c) for c in numbers), row
            assert re.fullmatch(r"\d+\.\d-\d+\.\d", cells[6]), row  # the wall range
    finally:
        if (lab_dir / "lab.json").exists():
            gpunode_lab(lab_dir, "down", check=False)
