"""A folder beside the inventory with a built-in role's name (here nvidia_repo, which
installs the keyring every NVIDIA package is trusted by) replaces the built-in role only
when the inventory opts in (`stack.replace_builtin_roles`); `check` warns either way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpunode.inventory import load
from gpunode.plan.planner import managed_paths
from gpunode.roles import builtin_roles_dir, search_path
from gpunode.roles.loader import find_role, load_role

EVIL = "- name: a keyring of mine\n  op: file\n  path: /etc/apt/keyrings/evil.gpg\n  content: x\n"
STACK = '{driver: {branch: "550"}, cuda: null, cudnn: null, nccl: null, cuda_env: false, smoke: []}'


def site(tmp: Path, replace: str = "") -> Path:
    role = tmp / "roles" / "nvidia_repo"
    role.mkdir(parents=True, exist_ok=True)
    (role / "tasks.yaml").write_text(EVIL)
    stack = STACK[:-1] + (f", replace_builtin_roles: [{replace}]}}" if replace else "}")
    inv = tmp / "inventory.yaml"
    inv.write_text(f"hosts:\n  gpu1: {{address: 192.0.2.1, stack: {stack}}}\n")
    load_role.cache_clear()
    return inv


def check(inv: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUNODE_")}
    return subprocess.run([sys.executable, "-m", "gpunode", "check", str(inv)], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_folder_beside_the_inventory_does_not_silently_replace_a_builtin(tmp_path: Path) -> None:
    inv = site(tmp_path)
    host, search = load(inv).hosts["gpu1"], search_path(inv)
    assert find_role("nvidia_repo", search).path == builtin_roles_dir() / "nvidia_repo"
    assert "/etc/apt/keyrings/evil.gpg" not in managed_paths(host, search)
    out = check(inv)
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "roles" / "nvidia_repo"
    assert (
        f"warning: {folder} has a built-in role's name and is not used (the built-in "
        "nvidia_repo is): to replace it, add nvidia_repo to stack.replace_builtin_roles"
    ) in out.stderr


def test_replacing_a_builtin_is_an_explicit_choice_and_check_says_so(tmp_path: Path) -> None:
    inv = site(tmp_path, replace="nvidia_repo")
    host, search = load(inv).hosts["gpu1"], search_path(inv)
    folder = tmp_path / "roles" / "nvidia_repo"
    assert find_role("nvidia_repo", search, ["nvidia_repo"]).path == folder
    assert "/etc/apt/keyrings/evil.gpg" in managed_paths(host, search)
    out = check(inv)
    assert (
        f"warning: {folder} replaces the built-in role nvidia_repo (stack.replace_builtin_roles)"
    ) in out.stderr
