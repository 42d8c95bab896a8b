"""The step journal's shell, run here with sh in a temporary directory: the begin, the step
counter and the end ride on the change's own commands; a change cut after any command
leaves an entry that the facts script's `journal` section reads back, and the planner's
re-run of it (its stdin from the host's root-only copy) does the whole change again."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from gpunode.changes import Change, Step
from gpunode.execute import journal
from gpunode.facts import model
from gpunode.facts.gather import script
from gpunode.facts.parse import parse_facts
from gpunode.plan.rerun import rebuilt

RUN = "20261203T101500-a1b2c3"
journal_commands, journal_end = journal.commands, journal.end_command


def change(out: Path) -> Change:
    """Three commands as a module blacklist has them: a file on stdin, its rebuild, a
    record on stdin."""
    return Change(
        "driver",
        "blacklist nouveau",
        "module_blacklist",
        "nouveau not blacklisted",
        (
            Step(f"cat > {out}/blacklist.conf", "blacklist nouveau\noptions nouveau modeset=0\n"),
            Step(f"cat {out}/blacklist.conf > {out}/initrd"),
            Step(f"cat >> {out}/record", "nvidia-open-550\n"),
        ),
    )


def run(command: str, stdin: bytes | None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", command], input=stdin or b"", capture_output=True)


def section(directory: Path) -> str:
    """The facts script's journal section, on `directory` instead of /var/lib/gpunode/journal."""
    text = script().decode()
    body = text[text.index("section journal\n") : text.index("# --- end journal ---")]
    body = body.replace(model.JOURNAL_DIR, str(directory))
    out = run("section() { printf '\\n### %s\\n' \"$1\"; }\n" + body + "section end\n", None)
    assert out.returncode == 0, out.stderr
    return out.stdout.decode()


@pytest.mark.parametrize("cut_after", [1, 2])
def test_a_cut_change_is_read_back_and_runs_again_whole(
    tmp_path: Path, cut_after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "journal"
    c = change(tmp_path)
    runs = journal.commands(c, RUN, str(d))
    for command, stdin in runs[:cut_after]:
        assert run(command, stdin).returncode == 0
    # the file is there; the rest never ran
    assert (tmp_path / "blacklist.conf").read_text().startswith("blacklist nouveau\n")
    assert (tmp_path / "initrd").exists() == (cut_after == 2)
    key = journal.entry_key(c)
    assert sorted(p.name for p in d.iterdir()) == [
        f"{key}.{s}" for s in ("1.in", "3.in", "json", "step")
    ]
    for n, s in ((1, c.steps[0]), (3, c.steps[2])):
        kept = d / f"{key}.{n}.in"
        assert kept.read_text() == s.stdin
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600  # may hold a file's contents
    assert stat.S_IMODE((d / f"{key}.json").stat().st_mode) == 0o644

    facts = parse_facts(section(d))
    assert facts.errors == []
    (entry,) = facts.journal
    assert (entry.run, entry.role, entry.task, entry.reached) == (
        RUN, "driver", "blacklist nouveau", cut_after + 1,
    )  # fmt: skip
    assert [(s.command, s.stdin) for s in entry.steps] == [
        (s.command, s.stdin is not None) for s in c.steps
    ]

    # the re-run: the journal's commands, stdin from the kept copies, under a journal of its own
    monkeypatch.setattr(model, "JOURNAL_DIR", str(d))
    again = rebuilt(entry)
    assert (
        again.reason
        == f"interrupted at its {['', '', '2nd', '3rd'][cut_after + 1]} command in run {RUN}"
    )
    (tmp_path / "blacklist.conf").unlink()
    for command, stdin in journal.commands(again, "20261203T101600-d4e5f6", str(d)):
        assert run(command, stdin).returncode == 0
    assert (tmp_path / "blacklist.conf").read_text() == c.steps[0].stdin
    assert (tmp_path / "initrd").read_text() == c.steps[0].stdin
    assert (tmp_path / "record").read_text() == "nvidia-open-550\n"
    assert list(d.iterdir()) == []  # ended: nothing left for the next facts


def test_the_entry_ends_only_when_the_last_command_succeeds(tmp_path: Path) -> None:
    d = tmp_path / "journal"
    c = Change("r", "t", "command", "why", (Step("true"), Step("exit 7")))
    runs = journal.commands(c, RUN, str(d))
    assert run(*runs[0]).returncode == 0
    assert run(*runs[1]).returncode == 7  # the command's own status
    (entry,) = parse_facts(section(d)).journal
    assert entry.reached == 2
    # an `exit 0` inside a command still lets the entry end
    ok = Change("r", "t", "command", "why", (Step("true"), Step("exit 0; echo never")))
    runs = journal.commands(ok, RUN, str(d))
    assert [run(*r).returncode for r in runs] == [0, 0]
    assert list(d.iterdir()) == []


def test_the_first_command_keeps_its_own_stdin_after_the_journals(tmp_path: Path) -> None:
    d = tmp_path / "journal"
    body = "x" * 70000 + "\n"  # larger than a pipe's buffer
    c = Change(
        "r", "t", "file", "why", (Step(f"cat > {tmp_path}/a", body), Step("cat", "second\n"))
    )
    (command, stdin), _ = journal.commands(c, RUN, str(d))
    assert stdin is not None and stdin.endswith(body.encode())
    assert run(command, stdin).returncode == 0
    assert (tmp_path / "a").read_text() == body


def test_a_journal_that_cannot_be_written_runs_nothing(tmp_path: Path) -> None:
    (tmp_path / "journal").write_text("a file where the directory should be")
    c = Change("r", "t", "file", "why", (Step(f"touch {tmp_path}/ran"),))
    ((command, stdin),) = journal.commands(c, RUN, str(tmp_path / "journal"))
    out = run(command, stdin)
    assert out.returncode == 1
    assert b"the step journal" in out.stderr and b"could not be written" in out.stderr
    assert not (tmp_path / "ran").exists()


def test_changes_of_the_login_user_keep_no_entry() -> None:
    c = Change("conda", "env", "conda_env", "why", (Step("true", "in"),), sudo=False)
    assert journal.commands(c, RUN) == [("true", b"in")]


def test_the_journal_costs_no_round_trip_and_a_few_milliseconds(tmp_path: Path) -> None:
    """The same number of commands; the shell's extra work measured against the bare one."""
    d = tmp_path / "journal"
    c = Change("r", "t", "file", "why", (Step("cat >/dev/null", "x\n"), Step("true")))
    runs = journal.commands(c, RUN, str(d))
    assert len(runs) == len(c.steps)
    n = 20
    start = time.perf_counter()
    for _ in range(n):
        for s in c.steps:
            run(s.command, (s.stdin or "").encode())
    bare = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(n):
        for command, stdin in runs:
            assert run(command, stdin).returncode == 0
    wrapped = time.perf_counter() - start
    extra_ms = (wrapped - bare) / n * 1000
    print(f"journal: {extra_ms:.1f} ms more per two-command change ({bare / n * 1000:.1f} ms bare)")
    assert extra_ms < 200  # a handful of fork/exec (mkdir, dd, printf, mv, rm) on the host
    assert not os.listdir(d)
    assert re.fullmatch(r"[0-9a-f]{16}", journal.entry_key(c))


class Recording:
    """A transport that runs each command with sh here (as root would on a host) and keeps
    what it was asked to run."""

    name = "recording"
    inactivity_timeout = None
    connections_opened = 0

    def __init__(self, exit_codes: dict[int, int] | None = None) -> None:
        self.runs: list[tuple[str, bytes | None, bool]] = []
        self.exit_codes = exit_codes or {}

    def run(self, command: Any, *, sudo: bool = False, stdin: bytes | None = None, **_: Any) -> Any:
        from gpunode.transport.base import CommandResult

        self.runs.append((command, stdin, sudo))
        forced = self.exit_codes.get(len(self.runs))
        out = run(command, stdin) if forced is None else None
        code = forced if forced is not None else out.returncode if out else 0
        said = out.stdout.decode() if out else ""
        return CommandResult(str(command), code, said, "", 0.0)


def host_run(t: Recording) -> Any:
    from gpunode.events import Bus
    from gpunode.execute.host import HostRun, Options
    from tests.plan.planhelpers import STACK, host_from

    return HostRun(t, host_from(STACK), Bus(), Options(run_id=RUN))  # type: ignore[arg-type]


def test_the_executor_runs_each_command_once_with_the_journals_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "journal"
    monkeypatch.setattr(journal, "commands", lambda c, run_id: journal_commands(c, run_id, str(d)))
    t = Recording()
    hr = host_run(t)
    c = change(tmp_path)
    assert hr._change(c, 1, model.HostFacts())
    assert len(t.runs) == len(c.steps) == hr.t.round_trips  # no round trip of its own
    assert all(sudo for _, _, sudo in t.runs)
    assert t.runs[0][1] is not None and t.runs[0][1].endswith(c.steps[0].stdin.encode())  # type: ignore[union-attr]
    (done,) = hr.result.changes
    assert done.status == "changed" and done.commands == [s.shown() for s in c.steps]
    assert list(d.iterdir()) == []
    assert (tmp_path / "record").read_text() == "nvidia-open-550\n"


def test_a_refused_reload_ends_its_entry_in_one_more_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel kept the old module: the host reboots instead, which does the reload's
    work, so nothing is left to run again."""
    from gpunode.changes import RELOAD_REFUSED

    d = tmp_path / "journal"
    monkeypatch.setattr(journal, "commands", lambda c, run_id: journal_commands(c, run_id, str(d)))
    monkeypatch.setattr(
        journal, "end_command", lambda c, directory=str(d): journal_end(c, directory)
    )
    reload = Change("driver", "reload", "module_reload", "why", (Step("true"), Step("true")),
                    reload="the module changed")  # fmt: skip
    t = Recording(exit_codes={2: RELOAD_REFUSED})
    hr = host_run(t)
    assert hr._change(reload, 1, model.HostFacts())
    assert len(t.runs) == 3 and t.runs[-1][0] == journal_end(reload, str(d))
    assert list(d.iterdir()) == []
    assert hr.reboot_instead is not None
