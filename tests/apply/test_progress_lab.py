"""`apply --no-tui` on a lab host: timestamped progress lines, heartbeats of a step that runs
long (with its last output line), the commands with -v; and the full output of a failed step
in the run record and in `gpunode report RUN --host H`."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from tests.apply.labhelpers import Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-01"
LINES = 5000
TASKS = f"""\
- name: slow step
  op: command
  cmd: [sh, -c, "echo starting; sleep 2.5; echo halfway; sleep 2.5"]
  creates: /etc/progress-never

- name: loud failure
  op: command
  cmd: [sh, -c, "seq 1 {LINES}; echo boom >&2; exit 3"]
  creates: /etc/progress-never
"""
NO_STACK = {"driver": None, "cuda": None, "cudnn": None, "nccl": None, "cuda_env": False,
            "smoke": [], "conda": None}  # fmt: skip
TS = r"\d\d:\d\d:\d\d "


def test_progress_heartbeats_and_full_output_of_a_failed_step(lab: Lab, tmp_path: Path) -> None:
    role = tmp_path / "roles" / "progress"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(TASKS)
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["progress"])
    env = {**lab.env, "GPUNODE_HEARTBEAT": "1"}
    res = lab.gpunode("apply", str(inv), "--yes", "--no-tui", "--no-smoke", "-v",
                      "--limit", HOST, env=env)  # fmt: skip
    assert res.returncode == 2, res.stdout[-3000:] + res.stderr[-3000:]
    lines = res.stdout.splitlines()
    progress = [ln for ln in lines if not ln.startswith(" ") and "running" in ln]

    # every line of the live view has its time (the recap after it is a table)
    live = lines[: lines.index("RECAP")]
    assert live and all(re.match(TS, ln) for ln in live), [
        ln for ln in live if not re.match(TS, ln)
    ]
    assert any(re.fullmatch(TS + rf"  \[{HOST}\] {LINES}", ln) for ln in live)  # -v: its output

    assert any(re.fullmatch(TS + rf"running: \[{HOST}\] progress: slow step \(1/2\)", ln)
               for ln in progress), progress  # fmt: skip
    # -v: the exact command of each step
    assert any(re.fullmatch(TS + rf"  \[{HOST}\] \$ sh -c 'echo starting; sleep 2.5; echo "
                            r"halfway; sleep 2.5'", ln) for ln in lines), lines[:30]  # fmt: skip

    beats = [re.fullmatch(TS + rf"still running: \[{HOST}\] progress: slow step \((\d+)s\): (.*)",
                          ln) for ln in lines]  # fmt: skip
    found = [(int(m.group(1)), m.group(2)) for m in beats if m]
    assert {"starting", "halfway"} <= {said for _, said in found}, found
    # at most one a second (the interval) while it ran, and its elapsed time grows
    done = re.compile(rf"changed: \[{HOST}\] progress: slow step: .* \((\d+\.\d)s\)$")
    took = next(float(m.group(1)) for ln in lines if (m := done.search(ln)))
    assert 2 <= len(found) <= took + 1, (found, took)
    assert [s for s, _ in found] == sorted(s for s, _ in found)
    assert not any("loud failure" in ln and "still running" in ln for ln in lines)

    # the record keeps the failed step's whole output, privately
    record = Path(re.search(r"run record: (\S+)", res.stderr).group(1))  # type: ignore[union-attr]
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    data = json.loads(record.read_text())
    (failed,) = [c for c in data["hosts"][HOST]["changes"] if c["status"] == "failed"]
    out = failed["output"]
    assert out["exit_code"] == 3 and out["stdout_cut"] == 0
    assert out["stdout"].splitlines() == [str(n) for n in range(1, LINES + 1)]
    assert out["stderr"].strip() == "boom"
    assert out["command"] == f"sh -c 'seq 1 {LINES}; echo boom >&2; exit 3'"

    shown = lab.gpunode("report", data["id"], "--host", HOST)
    assert shown.returncode == 0, shown.stderr
    body = shown.stdout.splitlines()
    start = body.index("    --- stdout")
    assert body[start + 1 : start + 1 + LINES] == [str(n) for n in range(1, LINES + 1)]
    assert body[start + 1 + LINES :] == ["    --- stderr", "boom"]
    # without --host, the run's summary points at it
    summary = lab.gpunode("report", data["id"]).stdout
    assert f"full output: gpunode report {data['id']} --host {HOST}" in summary
    assert "\n4999\n" not in summary
