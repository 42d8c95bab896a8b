"""Mistakes `gpunode check` catches before anything reaches a host, one folder each under
mistakes/: an inventory (with its group_vars/ and host_vars/ files) and expected.txt, the
exact error lines `check` prints for it ({case}: the folder, {cwd}: the directory check
runs in). An empty expected.txt: the inventory passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpunode.cli.check import check
from gpunode.exitcodes import ExitCode
from gpunode.inventory import load
from gpunode.inventory.controller import controller_problems

MISTAKES = Path(__file__).resolve().parent / "mistakes"
CASES = sorted(p for p in MISTAKES.iterdir() if p.is_dir())


def _expected(case: Path, cwd: Path) -> list[str]:
    text = (case / "expected.txt").read_text()
    text = text.replace("{case}", str(case)).replace("{cwd}", str(cwd))
    return [line for line in text.splitlines() if line]


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_check_names_each_mistake_where_it_was_made(
    case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative key paths are read from here, as ssh reads them
    result = CliRunner().invoke(check, [str(case / "inv.yaml")])
    expected = _expected(case, tmp_path)
    assert [line for line in result.stderr.splitlines() if line.startswith("error: ")] == expected
    assert result.exit_code == (ExitCode.BAD_INPUT if expected else ExitCode.OK), result.output


def test_the_command_line_exits_bad_input_naming_the_mistake(tmp_path: Path) -> None:
    case = MISTAKES / "python_without_wheels"
    done = subprocess.run(
        [sys.executable, "-m", "gpunode", "check", str(case / "inv.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == ExitCode.BAD_INPUT
    assert done.stderr.splitlines() == [
        *_expected(case, tmp_path),
        f"1 problem in {case}/inv.yaml; nothing was changed.",
    ]
    assert done.stdout == ""


def test_a_key_path_from_home_is_looked_for_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "inv.yaml").write_text(
        "defaults: {ssh: {identity_file: ~/.ssh/lab_ed25519}}\n"
        "hosts:\n  a: {address: 192.0.2.1}\n  b: {address: 192.0.2.2, ssh: {identity_file: null}}\n"
    )
    inv = load(tmp_path / "inv.yaml")
    a, b = inv.hosts["a"], inv.hosts["b"]
    assert controller_problems(a, tmp_path) == [
        (
            ("ssh", "identity_file"),
            f"the SSH key '~/.ssh/lab_ed25519' ({tmp_path}/.ssh/lab_ed25519) does not exist on "
            "this machine: fix the path, or drop identity_file to use the SSH agent and the ssh "
            "config's keys",
        )
    ]
    assert controller_problems(b, tmp_path) == []  # unset: the agent's and ssh config's keys
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh/lab_ed25519").write_text("key\n")
    assert controller_problems(a, tmp_path) == []
