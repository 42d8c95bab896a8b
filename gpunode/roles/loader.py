"""Load roles: defaults.yaml, tasks.yaml and templates/ under roles/<name>/.

A role is data. Built-in roles ship in the top-level roles/ folder (installed as
gpunode/_builtin_roles); an inventory may bring its own in a roles/ folder next
to it. One with a built-in role's name replaces it only when the inventory says so
(`stack.replace_builtin_roles`): a folder dropped beside an inventory cannot silently
become, say, the repository role that installs the keyring every package is trusted by.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode import diskmemo
from gpunode.inventory.yamlpos import Position, YamlError
from gpunode.inventory.yamlsrc import load_file
from gpunode.memo import once

TASK_KEYS = {"name", "op", "when", "loop", "tags", "on_change"}


class RoleError(Exception):
    """A role that cannot be used: names the file and line, what is wrong, what to do."""


@dataclass(frozen=True)
class Task:
    name: str
    op: str
    args: dict[str, Any]
    position: Position
    when: str | None = None
    loop: Any = None
    tags: tuple[str, ...] = ()
    on_change: tuple[str, ...] = ()


@dataclass(frozen=True)
class Role:
    name: str
    path: Path
    defaults: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[Task, ...] = ()

    @property
    def templates(self) -> Path:
        return self.path / "templates"


@once  # asked for each role of each host: resolving __file__ is a dozen system calls
def builtin_roles_dir() -> Path:
    here = Path(__file__).resolve().parent.parent
    installed = here / "_builtin_roles"
    return installed if installed.is_dir() else here.parent / "roles"


def search_path(inventory_file: str | Path | None) -> tuple[Path, ...]:
    dirs: list[Path] = []
    if inventory_file is not None:
        own = Path(inventory_file).resolve().parent / "roles"
        if own.is_dir():
            dirs.append(own)
    dirs.append(builtin_roles_dir())
    return tuple(dirs)


def find_role(name: str, search: tuple[Path, ...], replace: Collection[str] = ()) -> Role:
    """The role `name` from the first folder of `search` that has it; a built-in role's
    name from another folder only if `replace` names it."""
    return load_role(role_folder(name, search, tuple(replace)))


@once  # asked for each role of each host: the folders are looked at once a process
def role_folder(name: str, search: tuple[Path, ...], replace: tuple[str, ...]) -> Path:
    """The folder find_role takes the role `name` from."""
    builtin = builtin_roles_dir()
    for base in search:
        if (base / name / "tasks.yaml").is_file():
            if base != builtin and name not in replace and (builtin / name).is_dir():
                continue
            return base / name
    looked = ", ".join(str(d) for d in search)
    raise RoleError(
        f"role {name!r} not found (looked in {looked}): create {search[0]}/{name}/tasks.yaml "
        "or remove it from stack.roles"
    )


def shadowing(search: tuple[Path, ...]) -> list[Path]:
    """The folders of `search`'s site roles/ that have a built-in role's name."""
    builtin = builtin_roles_dir()
    return [
        base / p.name
        for base in search
        if base != builtin
        for p in sorted(base.iterdir())
        if (p / "tasks.yaml").is_file() and (builtin / p.name / "tasks.yaml").is_file()
    ]


@once
def load_role(path: Path) -> Role:
    # parsed once, then kept between runs (gpunode.diskmemo); parse errors are never kept
    code = diskmemo.code_of(__name__, YAMLSRC, YAMLNODES, "ruamel.yaml")
    files = (diskmemo.small_file(path / name) for name in _ROLE_FILES)
    k = diskmemo.key(code, os.fsencode(str(path)), *files)
    plain = diskmemo.get("roles", k) if k else None
    if plain is not None:
        with contextlib.suppress(TypeError, ValueError, KeyError):
            return _from_plain(path, plain)
    role = _parse_role(path)
    if k:
        diskmemo.put("roles", k, _to_plain(role))
    return role


_ROLE_FILES = ("defaults.yaml", "tasks.yaml")
YAMLSRC = "gpunode.inventory.yamlsrc"
YAMLNODES = "gpunode.inventory.yamlnodes"


def _to_plain(role: Role) -> dict[str, Any]:
    tasks = [
        {
            **{f: getattr(t, f) for f in ("name", "op", "args", "when", "loop")},
            "position": [t.position.file, t.position.line, t.position.column],
            "tags": list(t.tags),
            "on_change": list(t.on_change),
        }
        for t in role.tasks
    ]
    return {"defaults": role.defaults, "tasks": tasks}


def _from_plain(path: Path, plain: dict[str, Any]) -> Role:
    tasks = tuple(
        Task(
            **{f: t[f] for f in ("name", "op", "args", "when", "loop")},
            position=Position(*t["position"]),
            tags=tuple(t["tags"]),
            on_change=tuple(t["on_change"]),
        )
        for t in plain["tasks"]
    )
    return Role(name=path.name, path=path, defaults=plain["defaults"], tasks=tasks)


def _parse_role(path: Path) -> Role:
    defaults: dict[str, Any] = {}
    dfile = path / "defaults.yaml"
    if dfile.is_file():
        data = _load(dfile).data or {}
        if not isinstance(data, dict):
            raise RoleError(f"{dfile}:1:1: defaults must be a mapping of variable: value")
        defaults = data
    tfile = path / "tasks.yaml"
    src = _load(tfile)
    if not isinstance(src.data, list):
        raise RoleError(f"{tfile}:1:1: tasks must be a list of {{name, op, ...}} mappings")
    tasks = []
    for i, raw in enumerate(src.data):
        pos = src.position((i,))
        if not isinstance(raw, dict):
            raise RoleError(f"{pos}: a task is a mapping with at least `name` and `op`")
        missing = [k for k in ("name", "op") if k not in raw]
        if missing:
            raise RoleError(f"{pos}: task is missing {', '.join(missing)}")
        tags = raw.get("tags", [])
        on_change = raw.get("on_change", [])
        if not isinstance(tags, list) or not isinstance(on_change, list):
            raise RoleError(f"{pos}: `tags` and `on_change` are lists")
        tasks.append(
            Task(
                name=str(raw["name"]),
                op=str(raw["op"]),
                args={k: v for k, v in raw.items() if k not in TASK_KEYS},
                position=pos,
                when=raw.get("when"),
                loop=raw.get("loop"),
                tags=tuple(str(t) for t in tags),
                on_change=tuple(str(c) for c in on_change),
            )
        )
    return Role(name=path.name, path=path, defaults=defaults, tasks=tuple(tasks))


def _load(path: Path) -> Any:
    try:
        return load_file(path)
    except YamlError as exc:
        raise RoleError(str(exc)) from None
