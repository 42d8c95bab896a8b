"""`group_vars/<group>.yaml` and `host_vars/<host>.yaml` beside an inventory, as Ansible reads
them: each holds the settings of one group (`all` for every host) or one host, and wins over
what the inventory file itself sets at the same level.

Each file is loaded as strictly as the inventory and validated on its own, so a mistake in
it is reported at its own `file:line:column`. Its positions are copied into the inventory's
source under a key of their own, which lets the merged hosts' errors point into it too.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gpunode.inventory.errors import InventoryError, Problem
from gpunode.inventory.model import HostEntry, Settings
from gpunode.inventory.validation import validate
from gpunode.inventory.yamlpos import Path_, Position, Source, YamlError
from gpunode.inventory.yamlsrc import load_file

Layer = tuple[Path_, dict[str, Any]]


@dataclass
class VarsFiles:
    """The layers the files beside an inventory add: `(path prefix, settings)` each."""

    all: Layer | None = None
    groups: dict[str, Layer] = field(default_factory=dict)
    hosts: dict[str, Layer] = field(default_factory=dict)


def load_vars_files(
    src: Source, base: Path, groups: Iterable[str], hosts: Iterable[str]
) -> VarsFiles:
    """Read the files for `all`, each group and each host that exist. A file for a name the
    inventory does not have is refused (Ansible ignores it, but then a misspelt name would
    silently do nothing), with the name it is closest to."""
    out = VarsFiles()
    problems: list[Problem] = []
    groups, hosts = ["all", *groups], list(hosts)
    for kind, names, model in (
        ("group_vars", groups, Settings),
        ("host_vars", hosts, HostEntry),
    ):
        folder = base / kind
        if not folder.is_dir():
            continue
        problems += _unknown_names(folder, names, groups if kind == "host_vars" else hosts)
        for name in dict.fromkeys(names):
            found = [p for p in (folder / f"{name}.yaml", folder / f"{name}.yml") if p.exists()]
            if len(found) > 1:
                problems.append(
                    Problem(src.position(()), "", f"both {found[0]} and {found[1]} exist: keep one")
                )
                continue
            if not found:
                continue
            try:
                layer = _layer(src, found[0], model)
            except InventoryError as exc:
                problems += exc.problems
                continue
            if kind == "host_vars":
                out.hosts[name] = layer
            elif name == "all":
                out.all = layer
            else:
                out.groups[name] = layer
    if problems:
        raise InventoryError(problems)
    return out


def _unknown_names(folder: Path, names: list[str], others: list[str]) -> list[Problem]:
    """A problem for each settings file in `folder` that names none of `names`."""
    group = folder.name == "group_vars"
    what, other = ("group", "host") if group else ("host", "group")
    problems = []
    for path in sorted(folder.iterdir()):
        if path.suffix not in {".yaml", ".yml"} or path.stem in names or not path.is_file():
            continue
        close = difflib.get_close_matches(path.stem, names, n=1)
        if close:
            hint = f"did you mean {close[0]!r}? Rename the file to {close[0]}{path.suffix}"
        elif path.stem in others:
            hint = f"{path.stem} is a {other}: move the file to {other}_vars/"
        else:
            listed = [n for n in names if n != "all"]
            known = ", ".join(listed[:8]) + (
                f" and {len(listed) - 8} more" if len(listed) > 8 else ""
            )
            known = known or "none"
            hint = f"the inventory's {what}s are {known}: rename the file, or remove it"
        problems.append(
            Problem(
                Position(str(path), 1, 1),
                "",
                f"no {what} {path.stem!r} in the inventory, so this file would do nothing: {hint}",
            )
        )
    return problems


def _layer(src: Source, path: Path, model: type[BaseModel]) -> Layer:
    try:
        side = load_file(path)
    except YamlError as exc:
        raise InventoryError([Problem(exc.position, "", exc.message)]) from None
    data = side.data if side.data is not None else {}
    if not isinstance(data, dict):
        what = "a group's settings" if model is Settings else "a host's settings"
        raise InventoryError([Problem(side.position(()), "", f"expected a mapping of {what}")])
    validate(side, data, model)
    prefix: Path_ = (str(path),)
    for loc, position in side.positions.items():
        src.positions[prefix + loc] = position
    return prefix, data
