"""doctor's plain and JSON views and its exit status, from outcomes made here."""

from __future__ import annotations

from pathlib import Path

from gpunode.doctor.gather import Diagnosis, exit_status
from gpunode.doctor.model import Finding
from gpunode.exitcodes import ExitCode
from gpunode.hostpool import Outcome
from gpunode.views.doctor import doctor_json, doctor_summary, doctor_text
from gpunode.views.envelope import dumps
from gpunode.views.schemas import validate

ERR = Finding("gpu.xid", "error", "Xid 79", "NVRM: Xid (PCI:0000:2b:00): 79, ...", "reboot")
WARN = Finding("cuda.home-unset", "warning", "CUDA_HOME unset", "CUDA_HOME=", "cuda_env")
INFO = Finding("gpu.clocks-throttled", "info", "power cap", "SW Power Cap : Active", "none")


def ok(name: str, *findings: Finding) -> Outcome[Diagnosis]:
    return Outcome(name, "ok", value=Diagnosis(name, list(findings)))


def test_exit_status_ranks_unreachable_then_error_then_warning() -> None:
    down: Outcome[Diagnosis] = Outcome("c", "unreachable", error="timed out")
    assert exit_status({"a": ok("a", INFO)}) == ExitCode.OK
    assert exit_status({"a": ok("a", WARN), "b": ok("b")}) == ExitCode.DOCTOR_WARNING
    assert exit_status({"a": ok("a", WARN), "b": ok("b", ERR)}) == ExitCode.DOCTOR_ERROR
    assert exit_status({"a": ok("a", ERR), "c": down}) == ExitCode.UNREACHABLE


def test_plain_one_block_per_host_worst_first() -> None:
    down: Outcome[Diagnosis] = Outcome("c", "unreachable", error="timed out")
    outcomes = {"a": ok("a", ERR, WARN), "b": ok("b", INFO), "c": down}
    text = doctor_text(outcomes)
    assert text.splitlines()[:4] == [
        "a: error (1 error, 1 warning)",
        "  error    gpu.xid: Xid 79",
        "           evidence: NVRM: Xid (PCI:0000:2b:00): 79, ...",
        "           fix:      reboot",
    ]
    assert "\nb: healthy (1 info)\n" in text and "\nc: UNREACHABLE: timed out\n" in text
    assert doctor_summary(outcomes) == "1 of 3 hosts healthy, 1 with errors, 1 not read"


def test_json_fits_its_schema() -> None:
    outcomes = {"a": ok("a", ERR), "c": Outcome("c", "unreachable", error="timed out")}
    doc = validate("doctor", dumps("doctor", doctor_json(outcomes, 3)))
    assert doc.exit_code == 3 and doc.hosts["c"].health is None
    assert doc.hosts["a"].findings[0].evidence == ERR.evidence


def test_a_doctor_run_is_recorded_and_the_exporter_reads_its_findings(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    from gpunode.views.hoststate import RunRecords

    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  me: {connection: local, become: none}\n")
    env = {**os.environ, "GPUNODE_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run([sys.executable, "-m", "gpunode", "doctor", str(inv), "--json"],
                         capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    shown = json.loads(out.stdout)["hosts"]["me"]["findings"]
    (path,) = (tmp_path / "state" / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["command"] == "doctor" and rec["exit_code"] == out.returncode
    assert rec["hosts"]["me"]["findings"] == shown and shown  # this machine has no GPU driver
    counts = RunRecords(tmp_path / "state" / "runs").states(["me"])["me"].findings
    want: dict[str, int] = {}
    for f in shown:
        want[f["severity"]] = want.get(f["severity"], 0) + 1
    assert counts == want
