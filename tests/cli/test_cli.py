"""The command line as a user runs it: real processes, exit codes, messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_INVENTORY as EXAMPLE


def gpunode(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpunode", *args], capture_output=True, text=True, timeout=60
    )


def test_version_and_help() -> None:
    from gpunode import __version__

    out = gpunode("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"gpunode, version {__version__}"
    helped = gpunode("--help")
    assert helped.returncode == 0
    for name in ("check", "hosts", "schema", "plan", "apply", "lab"):
        assert f"\n  {name} " in helped.stdout


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys; from gpunode.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('textual', 'paramiko', 'torch', 'pydantic', 'ruamel.yaml')"
        " if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "HEAVY="


def test_check_shipped_example() -> None:
    out = gpunode("check", EXAMPLE)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{EXAMPLE}: ok (3 hosts, 2 groups)"


def test_check_bad_input_exits_4_with_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "defaults:\n"
        "  stack:\n"
        "    driver: {branch: 550, hold: on}\n"
        "    cuda: {toolkits: [12.10]}\n"
        "hosts:\n"
        "  a: {address: 192.0.2.1, colour: red}\n"
    )
    out = gpunode("check", str(bad))
    assert out.returncode == 4
    lines = out.stderr.strip().splitlines()
    assert lines == [
        f"error: {bad}:3:22: defaults.stack.driver.branch: versions must be quoted strings: "
        'write "550"',
        f"error: {bad}:3:33: defaults.stack.driver.hold: 'on' is not a boolean here: "
        "write true or false",
        f"error: {bad}:4:23: defaults.stack.cuda.toolkits[0]: versions must be quoted strings: "
        'write "12.10" (YAML reads 12.10 as the number 12.1)',
        f"error: {bad}:6:27: hosts.a.colour: unknown key 'colour': allowed: address, apt, become, "
        "become_password_env, become_pty, connection, gpus, hooks, nccl, reboot, repos, slurm, "
        "ssh, stack",
        f"4 problems in {bad}; nothing was changed.",
    ]
    assert out.stdout == ""


def test_check_impossible_stack(tmp_path: Path) -> None:
    bad = tmp_path / "stack.yaml"
    bad.write_text(
        'defaults:\n  stack:\n    driver: {branch: "550"}\n    cuda: {toolkits: ["12.8"]}\n'
        "hosts:\n  a: {address: 192.0.2.1}\n  b: {address: 192.0.2.2}\n"
    )
    out = gpunode("check", str(bad))
    assert out.returncode == 4
    assert out.stderr.splitlines()[0] == (
        f"error: {bad}:4:23: stack.cuda.toolkits[0]: CUDA 12.8 needs driver >= 570.26 but "
        "branch 550 is requested: use branch >= 570, or CUDA <= 12.4 [2 hosts (a, b)]"
    )


def test_missing_file_exits_4(tmp_path: Path) -> None:
    out = gpunode("check", str(tmp_path / "none.yaml"))
    assert out.returncode == 4
    assert "none.yaml:1:1: no such file" in out.stderr


def test_hosts_json_is_the_merged_state() -> None:
    out = gpunode("hosts", EXAMPLE, "--limit", "h100", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["kind"], data["schema"]) == ("hosts", 1)
    assert list(data["hosts"]) == ["gpu-h100-01"]
    host = data["hosts"]["gpu-h100-01"]
    assert host["name"] == "gpu-h100-01"
    assert host["stack"]["driver"] == {
        "branch": "570",
        "version": None,
        "update": "keep",
        "flavor": "open",
        "hold": True,
        "reload": False,
        "source": "nvidia",
        "server": False,
        "headless": True,
    }
    assert host["ssh"]["port"] == 2222
    assert host["groups"] == ["h100"]


def test_hosts_text_and_bad_limit() -> None:
    out = gpunode("hosts", EXAMPLE, "--limit", "a100,!gpu-a100-02")
    assert out.returncode == 0
    assert "gpu-a100-01" in out.stdout and "gpu-a100-02" not in out.stdout
    assert "driver   550 (open, held)" in out.stdout
    bad = gpunode("hosts", EXAMPLE, "--limit", "nosuch")
    assert bad.returncode == 4
    assert "--limit 'nosuch' matches no host or group" in bad.stderr


def test_schema_describes_the_inventory() -> None:
    out = gpunode("schema")
    assert out.returncode == 0
    schema = json.loads(out.stdout)
    assert set(schema["properties"]) == {"name", "defaults", "groups", "hosts"}
    assert schema["$defs"]["Driver"]["properties"]["flavor"]["enum"] == ["open", "proprietary"]
    assert json.loads(gpunode("schema", "--inventory").stdout) == schema


@pytest.mark.parametrize("cmd", ["check", "hosts"])
def test_unknown_option_is_a_usage_error(cmd: str) -> None:
    out = gpunode(cmd, EXAMPLE, "--nope")
    assert out.returncode == 5
    assert "No such option '--nope'" in out.stderr
