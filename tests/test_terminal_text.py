"""Host text reaches the terminal inert: every plain view escapes escape sequences, C0/C1
controls and bidi overrides (the one sanitiser, gpunode.safetext.printable).

Each hostile string is what a host can put in front of the admin: a process name, a GPU
name, a kernel log line, a package or a reason quoting apt's output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpunode import events as ev
from gpunode.changes import Change, HostPlan, Step
from gpunode.doctor.gather import Diagnosis
from gpunode.doctor.model import Finding
from gpunode.execute.result import HostResult, RunResult
from gpunode.facts.model import GpuProcess, HostFacts, NvidiaSmi, SmiGpu
from gpunode.hostpool import Outcome
from gpunode.monitor import Board
from gpunode.safetext import printable
from gpunode.smoke.report import render as smoke_render
from gpunode.smoke.runner import HostSmoke
from gpunode.views.doctor import doctor_text
from gpunode.views.facts import facts_text
from gpunode.views.plain import PlainPrinter
from gpunode.views.planview import confirm_text, plan_text
from gpunode.views.recap import recap_text
from gpunode.views.top import sample_text

OSC8 = "\x1b]8;;https://evil.example/\x07click me\x1b]8;;\x07"
CSI = "\x1b[2J\x1b[1;31m"
C1 = "\x9b6n"  # a C1 CSI: a device status report request
BIDI = "\u202egpj.exe"
TITLE = "\x1b]0;owned\x07"
HOSTILE = f"evil{CSI}{OSC8}{C1}{BIDI}{TITLE}\rhidden\x00\x7f"
SHOWN = "evil\\x1b[2J\\x1b[1;31m"  # how each copy of it starts, escaped


def assert_inert(text: str) -> None:
    """No control character but newlines and tabs; the escape shows as its characters."""
    bad = sorted({hex(ord(ch)) for ch in text if not (ch.isprintable() or ch in "\n\t")})
    assert not bad, f"raw controls reach the terminal: {bad}"
    assert "\\x1b]8;;https://evil.example/" in text  # shown, not dropped silently
    assert "\\u202e" in text and "\\x9b" in text and "\\r" in text


def test_printable_escapes_every_control_and_keeps_lines_when_asked() -> None:
    assert printable("plain text [bold]") == "plain text [bold]"
    assert printable("a\tb\nc") == "a\\tb\\nc"
    assert printable("a\tb\nc", lines=True) == "a\tb\nc"
    assert printable("\x1b[31mred\u202e\x85") == "\\x1b[31mred\\u202e\\x85"
    assert_inert(printable(HOSTILE))
    assert printable(printable(HOSTILE)) == printable(HOSTILE)  # escaping twice changes nothing


def test_plain_apply_output() -> None:
    out = io.StringIO()
    view = PlainPrinter(out, verbose=True, diff=True, heartbeat=3600)
    for e in (
        ev.HostUnreachable("h1", reason=HOSTILE),
        ev.CommandOutput("h1", index=1, stream="stdout", text=f"Unpacking {HOSTILE}\n"),
        ev.ChangeFinished("h1", index=1, title="driver", status="failed", seconds=1.0,
                          message=f"dpkg: error processing package {HOSTILE}", diff=HOSTILE),
        ev.DoctorFinding("h1", rule="gpu.xid", severity="error", title="Xid 79",
                         evidence=f"NVRM: Xid (PCI:0000:2b:00): 79, {HOSTILE}", fix="reboot"),
        ev.SmokeResult("h1", result=ev.SmokeCheck(name="nvidia-smi", status="fail",
                                                  reason=HOSTILE)),
    ):  # fmt: skip
        view(e)
    view.close()
    assert_inert(out.getvalue())
    assert out.getvalue().count(SHOWN) == 6


def test_plan_and_the_confirmation() -> None:
    step = Step(f"apt-get install -y pkg{HOSTILE}")
    change = Change("driver", f"install {HOSTILE}", "apt", f"held by {HOSTILE}", (step,))
    plan = HostPlan("h1", changes=(change,), notes=(HOSTILE,))
    assert_inert(plan_text(plan))
    assert_inert(plan_text(HostPlan("h1", refused=f"apt says: {HOSTILE}")))
    outcomes = {"h1": Outcome("h1", "ok", value=plan), "h2": Outcome("h2", "failed", error=HOSTILE)}
    text, pending = confirm_text(outcomes)
    assert pending == 1
    assert_inert(text)


def test_facts_gpu_and_process_names() -> None:
    facts = HostFacts(
        smi=NvidiaSmi(ok=True, driver_version="580", gpus=[SmiGpu(index=0, name=HOSTILE)]),
        gpu_processes=[GpuProcess(pid=7, name=HOSTILE)],
    )
    text = facts_text({"h1": Outcome("h1", "ok", value=facts)})
    assert_inert(text)
    assert text.count(SHOWN) == 2
    assert_inert(facts_text({"h2": Outcome("h2", "unreachable", error=HOSTILE)}))


def test_doctor_kernel_log_lines() -> None:
    xid = Finding("gpu.xid", "error", "Xid 79", f"NVRM: Xid (PCI:0000:2b:00): 79, {HOSTILE}", "x")
    assert_inert(doctor_text({"h1": Outcome("h1", "ok", value=Diagnosis("h1", [xid]))}))


def test_top_once_plain() -> None:
    board = Board(["h1"], clock=lambda: 1.0)
    from tests.tui.scenario import samples
    from tests.tui.test_hostile_text import renamed

    board.add_samples("h1", [renamed(samples("h1", 1, 0, 1.0)[0], HOSTILE)])
    assert_inert(sample_text(board.view("h1")))


def test_smoke_table_reasons() -> None:
    result = {"name": "nvidia-smi", "env": "", "status": "fail", "reason": HOSTILE, "unit": ""}
    assert_inert(smoke_render([HostSmoke("h1", results=[result])]))


def test_apply_recap_message() -> None:
    run = RunResult({"h1": HostResult("h1", status="failed", message=HOSTILE)})
    assert_inert(recap_text(run))


@pytest.mark.parametrize("only_host", [None, "h1"])
def test_report_of_a_record_with_host_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, only_host: str | None
) -> None:
    from gpunode.cli.report import report

    runs = tmp_path / "runs"
    runs.mkdir()
    record = {
        "id": "20260101-000000-abcd", "command": "apply", "inventory": "inv.yaml",
        "status": "finished", "exit_code": 2, "started": 0, "pid": 0,
        "hosts": {"h1": {
            "status": "failed", "counts": {"failed": 1}, "message": HOSTILE,
            "changes": [{"status": "failed", "title": HOSTILE, "reason": HOSTILE, "seconds": 1.0,
                         "message": HOSTILE, "output": {"command": "apt-get install x",
                                                        "exit_code": 100, "stdout": HOSTILE,
                                                        "stderr": HOSTILE}}],
            "smoke": {"results": [{"status": "fail", "name": "nvidia-smi", "reason": HOSTILE}]},
        }},
    }  # fmt: skip
    (runs / f"{record['id']}.json").write_text(json.dumps(record))
    monkeypatch.setenv("GPUNODE_STATE_DIR", str(tmp_path))
    args = ["--host", only_host] if only_host else []
    res = CliRunner().invoke(report, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert_inert(res.output)
    assert res.output.count(SHOWN) == (7 if only_host else 5)
    listed = CliRunner().invoke(report, ["--list"], catch_exceptions=False)
    assert "20260101-000000-abcd" in listed.output


def test_json_stays_as_it_is() -> None:
    """--json needs no sanitiser: the envelope escapes every control character."""
    from gpunode.views.envelope import dumps

    text = dumps("facts", {"hosts": {"h1": {"error": HOSTILE}}})
    assert "\x1b" not in text and "\\u001b]8;;https://evil.example/" in text
    assert json.loads(text)["hosts"]["h1"]["error"] == HOSTILE
