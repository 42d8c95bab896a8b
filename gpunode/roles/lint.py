"""Check roles without facts: every role a stack names exists and loads, and each task's
arguments fit its operation's argument model. Values that are Jinja (`{{ ... }}`) are only
known once rendered with facts: their names are checked, not their values."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpunode.roles.loader import Role, RoleError, Task, find_role, shadowing
from gpunode.roles.ops import OPERATIONS


def role_problems(
    names: Iterable[str], search: tuple[Path, ...], replace: Collection[str] = ()
) -> list[str]:
    """One message per problem, `file:line:column: ...` where the file says where."""
    problems: list[str] = []
    for name in dict.fromkeys(names):
        try:
            role = find_role(name, search, replace)
        except RoleError as exc:
            problems.append(str(exc))
            continue
        for task in role.tasks:
            problems += task_problems(role, task)
    return problems


def shadow_warnings(search: tuple[Path, ...], replace: Collection[str]) -> list[str]:
    """What `check` says of each site role folder with a built-in role's name."""
    return [
        f"{folder} replaces the built-in role {folder.name} (stack.replace_builtin_roles)"
        if folder.name in replace
        else f"{folder} has a built-in role's name and is not used (the built-in "
        f"{folder.name} is): to replace it, add {folder.name} to stack.replace_builtin_roles, "
        "or rename the folder"
        for folder in shadowing(search)
    ]


def task_problems(role: Role, task: Task) -> list[str]:
    where = f"{task.position} (task {task.name!r})"
    op = OPERATIONS.get(task.op)
    if op is None:
        return [f"{where}: unknown op {task.op!r}: use one of {', '.join(sorted(OPERATIONS))}"]
    templated = {k for k, v in task.args.items() if _templated(v)}
    raw = {k: v for k, v in task.args.items() if k not in templated}
    problems: list[str] = []
    if op.renders_template:
        src = raw.get("src")
        if "src" not in templated and not isinstance(src, str):
            problems.append(f"{where}: template needs `src:` (a file in templates/)")
        elif isinstance(src, str) and not (role.templates / src).is_file():
            problems.append(f"{where}: template {src!r} not found in {role.templates}")
        templated.add("content")  # rendered from src
    try:
        op.args_model.model_validate(raw)
    except ValidationError as exc:
        for e in exc.errors():
            field = ".".join(str(p) for p in e["loc"]) or "args"
            if e["loc"] and e["loc"][0] in templated:
                continue  # given, as a template: known once rendered
            problems.append(f"{where}: {task.op}: {field}: {e['msg']}")
    return problems


def _templated(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False
