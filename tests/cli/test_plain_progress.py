"""The plain view's progress lines and heartbeats, and the cap on a failed step's output."""

from __future__ import annotations

import io
import re
import time

from gpunode import events as ev
from gpunode.cli.report import step_output
from gpunode.execute.output import StepOutput
from gpunode.views.plain import PlainPrinter, last_line

TS = r"\d\d:\d\d:\d\d "


def wait_for(out: io.StringIO, pattern: str, timeout: float = 15.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        lines = out.getvalue().splitlines()
        if any(re.search(pattern, ln) for ln in lines):
            return lines
        assert time.monotonic() < deadline, lines
        time.sleep(0.02)


def test_a_running_change_beats_with_its_last_output_line_until_it_finishes() -> None:
    out = io.StringIO()
    p = PlainPrinter(out, heartbeat=0.2, verbose=True)
    cmds = ("apt-get install -y cuda-toolkit-12-4",)
    p(ev.ChangeStarted("gpu1", index=1, total=2, title="cuda: toolkit", commands=cmds))
    p(ev.CommandOutput("gpu1", index=1, stream="stdout", text="Unpacking a\rProgress: 40%\r"))
    lines = wait_for(out, r"still running: \[gpu1\] cuda: toolkit \(0s\): Progress: 40%$")
    assert re.fullmatch(TS + r"running: \[gpu1\] cuda: toolkit \(1/2\)", lines[0])
    assert re.fullmatch(TS + r"  \[gpu1\] \$ apt-get install -y cuda-toolkit-12-4", lines[1])
    assert all(re.match(TS, ln) for ln in lines)
    p(ev.ChangeFinished("gpu1", index=1, title="cuda: toolkit", status="changed", seconds=0.5))
    time.sleep(0.5)  # two more intervals: no beat for a change that has finished
    after = out.getvalue().splitlines()
    assert "still running" not in after[-1] and "changed: [gpu1] cuda: toolkit" in after[-1]
    p(ev.RunFinished("", exit_code=0, seconds=1.0))
    assert p._thread is not None and not p._thread.is_alive()


def test_beats_come_at_most_once_an_interval() -> None:
    out = io.StringIO()
    p = PlainPrinter(out, heartbeat=0.3)
    p(ev.ChangeStarted("gpu1", index=1, total=1, title="driver: install"))
    start = time.monotonic()
    wait_for(out, r"still running")
    time.sleep(1.0)
    p(ev.RunFinished("", exit_code=0, seconds=1.0))
    beats = [ln for ln in out.getvalue().splitlines() if "still running" in ln]
    elapsed = time.monotonic() - start
    assert 1 <= len(beats) <= elapsed / 0.3 + 1, beats
    assert not out.getvalue().splitlines()[0].endswith(":")  # without output: no ": "


def test_a_host_that_fails_mid_change_stops_beating() -> None:
    out = io.StringIO()
    p = PlainPrinter(out, heartbeat=0.2)
    p(ev.ChangeStarted("gpu1", index=1, total=1, title="driver: install"))
    p(ev.ChangeStarted("gpu2", index=1, total=1, title="driver: install"))
    wait_for(out, r"still running: \[gpu1\]")
    p(ev.HostStatusChanged("gpu1", status="failed", detail="sudo: incorrect password"))
    mark = len(out.getvalue().splitlines())
    wait_for(out, r"still running: \[gpu2\] driver: install \([1-9]s\)")
    time.sleep(0.5)
    later = out.getvalue().splitlines()[mark:]
    p(ev.RunFinished("", exit_code=2, seconds=1.0))
    assert later and not any("[gpu1]" in ln for ln in later), later


def test_last_line_is_the_last_non_blank_one_cut_to_a_line() -> None:
    assert last_line("a\nb\n\n") == "b"
    assert last_line("x" * 500).endswith("…") and len(last_line("x" * 500)) == 160
    assert last_line("\n \n") == ""


def test_a_failed_step_keeps_the_end_of_a_huge_output_and_says_it_was_cut() -> None:
    text = "".join(f"line {n}\n" for n in range(200_000))  # about 2.2 MB
    o = StepOutput.capped("make", 2, text, "", cap=1 << 20)
    assert len(o.stdout.encode()) <= 1 << 20 and o.stdout.endswith("line 199999\n")
    assert o.stdout.startswith("line ") and o.stdout_cut == len(text) - len(o.stdout)
    assert o.stderr == "" and o.stderr_cut == 0
    shown = step_output({"command": o.command, "exit_code": 2, "stdout": o.stdout,
                         "stdout_cut": o.stdout_cut, "stderr": "", "stderr_cut": 0})  # fmt: skip
    assert f"--- stdout (its first {o.stdout_cut} bytes were cut" in shown
    assert "--- stderr: empty" in shown and shown.splitlines()[0] == "    $ make"
