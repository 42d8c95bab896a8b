"""Stopping an apply through the CLI on a lab host: Ctrl-C (SIGINT), SIGTERM, a closed
stdout (`| head -2`), a second Ctrl-C that cuts, a SIGKILL the next run calls abandoned,
and a record directory gone mid-run. Each asserts the exit status, that no traceback is
printed, the record on disk and the host's real state: the change after the interrupted
one was not made."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, events, of, on_host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NOTHING: dict[str, Any] = {"driver": None, "cuda": None, "cudnn": None, "nccl": None,
                           "cuda_env": False, "smoke": []}  # fmt: skip
MARK = "/var/tmp/gpunode-stop-test"


def steps(first: str) -> str:
    """Three commands, each leaving a file: `first` is the shell of the first one."""
    out = ""
    for n, cmd in (("one", first), ("two", "true"), ("three", "true")):
        out += (
            f"- name: step {n}\n  op: command\n"
            f'  cmd: "{cmd}; mkdir -p {MARK} && touch {MARK}/{n}"\n'
            f"  creates: {MARK}/{n}\n"
        )
    return out


def inventory(lab: Lab, tmp: Path, first: str = "sleep 3") -> Path:
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(lab.inventory_text)
    for key, value in {**NOTHING, "roles": ["stops"]}.items():
        doc["defaults"]["stack"][key] = value
    (tmp / "roles" / "stops").mkdir(parents=True)
    (tmp / "roles" / "stops" / "tasks.yaml").write_text(steps(first))
    path = tmp / "inventory.yaml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    on_host(path, "lab-01", f"sudo rm -rf {MARK}")
    return path


def made(inv: Path) -> set[str]:
    """Which steps' files exist on lab-01 (its real state)."""
    out = on_host(inv, "lab-01", f"ls {MARK} 2>/dev/null || true")
    return set(out.split())


def start(lab: Lab, inv: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "-l", "lab-01"],
        env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def read_until(proc: subprocess.Popen[str], word: str) -> list[str]:
    """stdout's lines up to the first event named `word`."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if json.loads(line).get("event") == word:
            return lines
    pytest.fail(f"no {word} event: {''.join(lines)[-2000:]}")


def ended(proc: subprocess.Popen[str], within: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"apply did not end within {within} s: {err[-2000:]}")
    assert "Traceback" not in err, err
    return proc.returncode, out, err


def record(lab: Lab, evs: list[dict[str, Any]]) -> dict[str, Any]:
    path = Path(evs[-1]["record"])
    assert path.parent.parent == Path(lab.env["GPUNODE_STATE_DIR"])
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_lets_the_running_command_finish_and_starts_no_more(
    lab: Lab, tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    inv = inventory(lab, tmp_path)
    proc = start(lab, inv)
    before = read_until(proc, "change-started")
    proc.send_signal(sig)
    rc, out, err = ended(proc, within=30)
    evs = events("".join(before) + out)
    assert rc == code, err
    assert [e["event"] for e in evs[-2:]] == ["run-finished", "recap"], evs[-3:]
    assert of(evs, "run-interrupted"), [e["event"] for e in evs]
    assert evs[-1]["exit_code"] == code
    # the running step finished; the next one never started
    assert made(inv) == {"one"}
    assert [e["title"] for e in of(evs, "change-started")] == ["stops: step one"]
    host = of(evs, "host-finished", "lab-01")[0]
    assert host["status"] == "interrupted" and "before change 2/3" in host["message"], host
    data = record(lab, evs)
    assert data["status"] == "interrupted" and data["exit_code"] == code, data["status"]
    assert data["hosts"]["lab-01"]["status"] == "interrupted"
    assert "the run stopped" in err


def test_a_second_ctrl_c_cuts_the_running_command(lab: Lab, tmp_path: Path) -> None:
    inv = inventory(lab, tmp_path, first="sleep 120")
    proc = start(lab, inv)
    before = read_until(proc, "change-started")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)  # the second one is a second press, not the same one
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    rc, out, err = ended(proc, within=30)
    assert time.monotonic() - t0 < 20  # not the step's 120 s
    evs = events("".join(before) + out)
    assert rc == 130, err
    assert evs[-1]["event"] == "recap"
    assert any(e["cut"] for e in of(evs, "run-interrupted"))
    assert record(lab, evs)["status"] == "interrupted"
    assert not made(inv) & {"two", "three"}
    on_host(inv, "lab-01", "sudo pkill -f 'sleep 12[0]' || true")


def test_a_closed_stdout_stops_the_run_and_finishes_the_record(lab: Lab, tmp_path: Path) -> None:
    inv = inventory(lab, tmp_path)
    proc = start(lab, inv)
    assert proc.stdout is not None
    head = [proc.stdout.readline() for _ in range(2)]  # `| head -2`
    proc.stdout.close()
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("apply did not end after its stdout closed")
    assert "Traceback" not in err, err
    assert proc.returncode == 141, err
    assert [json.loads(line)["event"] for line in head] == ["run-started", "host-connecting"]
    assert "stdout was closed" in err
    runs = sorted((Path(lab.env["GPUNODE_STATE_DIR"]) / "runs").glob("*.json"))
    data = json.loads(runs[-1].read_text())
    assert data["status"] == "interrupted" and data["exit_code"] == 141
    assert not made(inv) & {"two", "three"}


def test_a_killed_run_is_abandoned_for_report_and_the_next_run(lab: Lab, tmp_path: Path) -> None:
    inv = inventory(lab, tmp_path)
    proc = start(lab, inv)
    read_until(proc, "change-started")
    proc.kill()
    proc.communicate()
    runs = sorted((Path(lab.env["GPUNODE_STATE_DIR"]) / "runs").glob("*.json"))
    assert json.loads(runs[-1].read_text())["status"] == "running"  # as the kill left it
    shown = lab.gpunode("report", "--json", runs[-1].stem)
    assert json.loads(shown.stdout)["status"] == "abandoned", shown.stdout[-1000:]
    listed = lab.gpunode("report", "--list")
    assert f"{runs[-1].stem}  apply  abandoned" in listed.stdout, listed.stdout
    again = lab.gpunode("apply", str(inv), "--yes", "--json", "-l", "lab-01")
    assert again.returncode == 0, again.stderr
    assert f"run {runs[-1].stem} was abandoned" in again.stderr, again.stderr
    on_disk = json.loads(runs[-1].read_text())
    assert on_disk["status"] == "abandoned" and "is gone" in on_disk["abandoned"]
    assert made(inv) == {"one", "two", "three"}


def test_a_record_directory_gone_mid_run_ends_with_a_warning_and_the_recap(
    lab: Lab, tmp_path: Path
) -> None:
    inv = inventory(lab, tmp_path)
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "-l", "lab-01",
         "--no-tui"],
        env={**lab.env, "GPUNODE_STATE_DIR": str(state)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if "running: [lab-01]" in line:
            break
    # the records' directory becomes unwritable (root ignores modes: a file takes its place)
    os.rename(state / "runs", state / "runs-gone")
    (state / "runs").write_text("")
    rc, out, err = ended(proc, within=30)
    assert rc == 0, err
    assert "RECAP" in out and "lab-01" in out
    assert "could not be written" in err, err
    assert made(inv) == {"one", "two", "three"}
