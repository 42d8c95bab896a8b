"""`gpunode check` checks the roles the stacks select, without facts: they exist, and each
task fits its operation's arguments, reported with file:line:column."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpunode.roles import builtin_roles_dir
from gpunode.roles.lint import role_problems

INVENTORY = """\
defaults:
  stack:
    roles: [probe, nosuch]
hosts:
  a: {address: 192.0.2.1}
"""

TASKS = """\
- name: fine, with a value known once rendered
  op: file
  path: "{{ vars.where }}"
  mode: "0600"
- name: a typo
  op: file
  path: /etc/x
  moed: "0600"
- name: a bad mode
  op: file
  path: /etc/y
  mode: rwx
- name: no such op
  op: copy
  path: /etc/z
- name: a template that is not there
  op: template
  src: missing.j2
  path: /etc/w
"""


def test_check_names_every_bad_task_and_missing_role(tmp_path: Path) -> None:
    (tmp_path / "roles" / "probe").mkdir(parents=True)
    tasks = tmp_path / "roles" / "probe" / "tasks.yaml"
    tasks.write_text(TASKS)
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    out = subprocess.run([sys.executable, "-m", "gpunode", "check", str(inv)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 4, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert errors[0].startswith(f"error: {tasks}:5:3 (task 'a typo'): file: moed: ")
    assert errors[1].startswith(f"error: {tasks}:9:3 (task 'a bad mode'): file: mode: ")
    assert errors[2].startswith(f"error: {tasks}:13:3 (task 'no such op'): unknown op 'copy'")
    assert errors[3] == (
        f"error: {tasks}:16:3 (task 'a template that is not there'): template 'missing.j2'"
        f" not found in {tasks.parent / 'templates'}"
    )
    assert errors[4].startswith("error: role 'nosuch' not found")
    assert len(errors) == 5, errors  # the templated path of the first task is no problem
    assert "5 problems in" in out.stderr


def test_the_builtin_roles_fit_their_operations() -> None:
    names = [p.name for p in builtin_roles_dir().iterdir() if (p / "tasks.yaml").is_file()]
    assert len(names) >= 7
    assert role_problems(names, (builtin_roles_dir(),)) == []
