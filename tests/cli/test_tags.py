"""`--tags`/`--skip-tags` cannot be mistyped, `plan --list-tags`: real processes, no host
contacted (the addresses are TEST-NET, never reached before the tags are checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

INVENTORY = """\
defaults:
  stack:
    driver: {branch: "570"}
    roles: [probe]
hosts:
  a: {address: 192.0.2.1}
  b: {address: 192.0.2.2, stack: {roles: []}}
"""

TASKS = """\
- name: one
  op: command
  cmd: "true"
  creates: /nonexistent
  tags: [slow, net]
- name: two
  op: command
  cmd: "true"
  creates: /nonexistent
  tags: [net]
"""


def gpunode(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpunode", *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    (tmp_path / "roles" / "probe").mkdir(parents=True)
    (tmp_path / "roles" / "probe" / "tasks.yaml").write_text(TASKS)
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    return path


def test_list_tags_prints_each_roles_tags(inv: Path) -> None:
    out = gpunode("plan", str(inv), "--list-tags")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "unattended_upgrades: unattended_upgrades",
        "nvidia_repo: nvidia_repo",
        "driver: driver",
        "probe: probe, slow, net",
    ]
    only_b = gpunode("plan", str(inv), "--list-tags", "--limit", "b", "--json")
    assert json.loads(only_b.stdout)["roles"] == {
        "unattended_upgrades": ["unattended_upgrades"],
        "nvidia_repo": ["nvidia_repo"],
        "driver": ["driver"],
    }


@pytest.mark.parametrize("option", ["--tags", "--skip-tags"])
def test_an_unknown_tag_is_a_usage_error_listing_the_valid_ones(inv: Path, option: str) -> None:
    for command in ("plan", "apply --yes"):
        out = gpunode(*command.split(), str(inv), option, "net,slwo")
        assert out.returncode == 5, (command, out.stderr)
        offered = "unattended_upgrades, nvidia_repo, driver, probe, slow, net"
        assert (
            f"unknown tag slwo (did you mean 'slow'?): the selected hosts' roles offer {offered}"
            in out.stderr
        )
        assert "unreachable" not in out.stdout + out.stderr  # refused before any host


def test_tags_of_unselected_hosts_are_unknown(inv: Path) -> None:
    out = gpunode("plan", str(inv), "--limit", "b", "--tags", "net")
    assert out.returncode == 5
    assert (
        "unknown tag net: the selected hosts' roles offer"
        " unattended_upgrades, nvidia_repo, driver (" in out.stderr
    )


def test_a_mistyped_smoke_test_name_is_refused_with_the_nearest(inv: Path) -> None:
    out = gpunode("smoke", str(inv), "--only", "nccl-allreduse")
    assert out.returncode == 5, out.stderr
    assert "'nccl-allreduse' (did you mean 'nccl-allreduce'?); one of nvidia-smi," in out.stderr
    assert "unreachable" not in out.stdout + out.stderr  # refused before any host


def test_an_ansible_host_pattern_selects_and_a_near_miss_is_named(inv: Path) -> None:
    out = gpunode("hosts", str(inv), "--limit", "all[1:]", "--json")
    assert out.returncode == 0, out.stderr
    assert list(json.loads(out.stdout)["hosts"]) == ["b"]
    out = gpunode("plan", str(inv), "--limit", "all[2]")
    assert out.returncode == 4, out.stderr
    assert "--limit 'all[2]': all has 2 host(s), positions 0 to 1" in out.stderr
