"""`group_vars/<group>.yaml` and `host_vars/<host>.yaml` beside an inventory, as Ansible reads
them: each holds the settings of one group (`all` for every host) or one host, and wins over
what the inventory file itself sets at the same level.

Each file is loaded as strictly as the inventory and validated on its own, so a mistake in
it is reported at its own `file:line:column`. Its positions are copied into the inventory's
source under a key of their own, which lets the merged hosts' errors point into it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gpunode.inventory.errors import InventoryError, Problem
from gpunode.inventory.model import HostEntry, Settings
from gpunode.inventory.validation import validate
from gpunode.inventory.yamlpos import Path_, Source, YamlError
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
    """Read the files for `all`, each group and each host that exist; files for names the
    inventory does not have are ignored, as Ansible ignores them."""
    out = VarsFiles()
    problems: list[Problem] = []
    for kind, names, model in (
        ("group_vars", ["all", *groups], Settings),
        ("host_vars", list(hosts), HostEntry),
    ):
        folder = base / kind
        if not folder.is_dir():
            continue
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
