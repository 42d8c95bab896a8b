"""One table of exit statuses: the module, `gpunode --help` and the README agree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from gpunode.exitcodes import RANK, ExitCode, table, worst

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_statuses_keep_their_numbers() -> None:
    # Scripts depend on these: a renumbering is a breaking change, never a side effect.
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0,
        "ERROR": 1,
        "FAILED": 2,
        "UNREACHABLE": 3,
        "BAD_INPUT": 4,
        "USAGE": 5,
        "HOSTKEY": 6,
        "PENDING": 7,
        "REBOOT_PENDING": 8,
        "DOCTOR_WARNING": 9,
        "DOCTOR_ERROR": 10,
        "LOCKED": 11,
        "INTERRUPTED": 130,
        "PIPE_CLOSED": 141,
        "TERMINATED": 143,
    }


def test_worst_ranks_hostkey_failed_unreachable_locked_input_reboot_pending() -> None:
    assert [int(c) for c in RANK] == [6, 2, 3, 11, 4, 8, 7, 10, 9]
    # each status wins over every one ranked after it, whatever the order given
    for i, code in enumerate(RANK):
        later = list(RANK[i + 1 :])
        assert worst([*later, code, ExitCode.OK]) == code
        assert worst(reversed([code, *later])) == code
    assert worst([]) == ExitCode.OK
    assert worst([ExitCode.OK, ExitCode.OK]) == ExitCode.OK


def test_readme_table_is_the_modules() -> None:
    text = README.read_text()
    body = text.split("| exit | meaning |\n| --- | --- |\n", 1)[1].split("\n\n", 1)[0]
    rows = [re.fullmatch(r"\| (\d+) \| (.+) \|", line) for line in body.splitlines()]
    assert all(rows), body
    assert [(int(m.group(1)), m.group(2)) for m in rows if m] == table()


def test_help_prints_the_table() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpunode", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    epilog = out.stdout.split("Exit status:\n", 1)[1]
    shown = [line.split(None, 1) for line in epilog.splitlines() if line.strip()]
    assert [(int(code), meaning) for code, meaning in shown] == table()
