"""Mistakes in how gpunode is run, not in the inventory, say what to do: a bad value in a
GPUNODE_* variable names the variable, and -K where no terminal can answer says how else
to give the password. Real processes; no host is contacted (TEST-NET addresses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.exitcodes import ExitCode

INVENTORY = "hosts:\n  a: {address: 192.0.2.1}\n"


def gpunode(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpunode", *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal, as under cron or CI
        env={**os.environ, **env},
    )  # fmt: skip


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    return path


@pytest.mark.parametrize(
    ("command", "var", "value", "why"),
    [
        ("apply", "GPUNODE_APPLY_FORKS", "abc", "'abc' is not a valid integer range"),
        ("plan", "GPUNODE_PLAN_FORKS", "0", "0 is not in the range 1<=x<=256"),
    ],
)
def test_a_bad_environment_value_names_its_variable(
    inv: Path, command: str, var: str, value: str, why: str
) -> None:
    out = gpunode(command, str(inv), **{var: value})
    assert out.returncode == ExitCode.USAGE, out.stderr
    assert (
        f"Invalid value for environment variable {var} (gpunode {command} -f/--forks): {why}"
        in out.stderr
    )
    # the same mistake on the command line is named as the option
    out = gpunode(command, str(inv), "--forks", value)
    assert "Invalid value for '-f' / '--forks'" in out.stderr


def test_ask_become_pass_without_a_terminal_says_how_else(inv: Path) -> None:
    out = gpunode("plan", str(inv), "-K")
    assert out.returncode == ExitCode.USAGE, out.stderr
    assert out.stderr.strip() == (
        "error: -K asks for the sudo password on a terminal, and there is none here: run it "
        "on a terminal, or put the password in an environment variable and name it with "
        "become_password_env in the inventory"
    )
    assert "interrupted" not in out.stderr and out.stdout == ""


@pytest.mark.parametrize(
    ("var", "value", "must"),
    [
        ("GPUNODE_HEARTBEAT", "abc", "a number of seconds above 0"),
        ("GPUNODE_SSH_TRANSPORT", "ssh", "paramiko or openssh"),
        ("GPUNODE_ALLOW_SSH_COMMANDS", "on", "1 or 0 (true/false, yes/no)"),
    ],
)
def test_a_variable_gpunode_reads_is_checked_before_any_host(
    inv: Path, var: str, value: str, must: str
) -> None:
    out = gpunode("plan", str(inv), **{var: value})
    assert out.returncode == ExitCode.USAGE, out.stderr
    assert f"error: environment variable {var}={value!r}: it must be {must}" in out.stderr
    assert out.stdout == ""


def test_a_mistyped_option_variable_is_named_not_ignored_silently(inv: Path) -> None:
    out = gpunode("plan", str(inv), "--list-tags", GPUNODE_PLAN_FORK="3")
    assert out.returncode == 0, out.stderr
    assert (
        "warning: GPUNODE_PLAN_FORK is no option of gpunode plan "
        "(did you mean GPUNODE_PLAN_FORKS?): it is ignored" in out.stderr
    )


def test_a_subcommands_option_variable_is_known_and_its_typo_named() -> None:
    # `mirror serve` is a subcommand: click reads GPUNODE_MIRROR_SERVE_BIND for its --bind.
    out = gpunode("mirror", "serve", "--help", GPUNODE_MIRROR_BIND="127.0.0.1:1")
    assert out.returncode == 0, out.stderr
    assert (
        "warning: GPUNODE_MIRROR_BIND is no option of gpunode mirror "
        "(did you mean GPUNODE_MIRROR_SERVE_BIND?): it is ignored" in out.stderr
    )
    out = gpunode("mirror", "serve", "--help", GPUNODE_MIRROR_SERVE_BIND="127.0.0.1:1")
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr
