"""Load an inventory file: strict YAML -> validated layers -> one merged Host per name."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpunode.inventory.conflicts import Layer, group_conflicts
from gpunode.inventory.errors import InventoryError, Problem, explain, field_path
from gpunode.inventory.model import Document, Host
from gpunode.inventory.patterns import select
from gpunode.inventory.validation import validate
from gpunode.inventory.varsfiles import VarsFiles, load_vars_files
from gpunode.inventory.yamlpos import Path_, Position, Source, YamlError
from gpunode.inventory.yamlsrc import load_file, load_text
from gpunode.records import InventoryId

MAX_MERGED = 1_000_000


@dataclass
class Inventory:
    source: Source
    hosts: dict[str, Host]
    groups: dict[str, list[str]] = field(default_factory=dict)
    layers: dict[str, list[tuple[Path_, dict[str, Any]]]] = field(default_factory=dict)
    """Per host, the (path in file, data) of each layer that built it, lowest first."""

    def where(self, host: str, loc: Path_) -> Position:
        """The file position that set `loc` for `host` (the last layer that wrote it)."""
        layers = self.layers.get(host, [])
        prefix = _provenance(layers, loc)
        if prefix is None:
            prefix = layers[-1][0] if layers else ()
        full = (*prefix, *loc)
        return self.source.positions.get((*full, "<value>")) or self.source.position(full)

    @property
    def path(self) -> Path:
        return Path(self.source.file)

    def select(self, pattern: str | None) -> list[Host]:
        return [self.hosts[n] for n in select(self, pattern)]

    @property
    def identity(self) -> InventoryId:
        """Which inventory this is, for the run records: its path and its `name:`."""
        data = self.source.data
        name = data.get("name") if isinstance(data, dict) else None
        return InventoryId.of(self.source.file, name if isinstance(name, str) else None)


def load(path: str | Path) -> Inventory:
    try:
        src = load_file(path)
    except YamlError as exc:
        raise InventoryError([Problem(exc.position, "", exc.message)]) from None
    return build(src, Path(path).parent)


def loads(text: str, file: str = "<inventory>") -> Inventory:
    try:
        src = load_text(text, file)
    except YamlError as exc:
        raise InventoryError([Problem(exc.position, "", exc.message)]) from None
    return build(src)


def build(src: Source, base: Path | None = None) -> Inventory:
    """Validate and merge `src`; with `base`, the group_vars/ and host_vars/ files there too."""
    data = src.data
    if data is None:
        # An empty file (or comments only) is a mistake: a truncated copy, a wrong path.
        raise InventoryError(
            [Problem(src.position(()), "", "the inventory is empty: declare `hosts:` in it")]
        )
    if not isinstance(data, dict):
        raise InventoryError(
            [
                Problem(
                    src.position(()),
                    "",
                    "an inventory is a mapping with `defaults`, `groups` and `hosts`",
                )
            ]
        )
    validate(src, data, Document)

    all_groups = data.get("groups") or {}
    all_hosts = [*(h for g in all_groups.values() for h in (g or {}).get("hosts") or {}),
                 *(data.get("hosts") or {})]  # fmt: skip
    side = load_vars_files(src, base, all_groups, all_hosts) if base else VarsFiles()
    layers_default: list[tuple[Path_, dict[str, Any]]] = [
        (("defaults",), data.get("defaults") or {}),
        *([side.all] if side.all else []),
    ]
    membership: dict[str, list[tuple[str, Path_, dict[str, Any]]]] = {}
    groups: dict[str, list[str]] = {}
    for gname, group in all_groups.items():
        group = group or {}
        groups[gname] = list((group.get("hosts") or {}).keys())
        for hname, entry in (group.get("hosts") or {}).items():
            membership.setdefault(hname, []).append((gname, ("groups", gname), group))
            if gname in side.groups:
                prefix, settings = side.groups[gname]
                membership[hname].append(("", prefix, settings))
            membership[hname].append(("", ("groups", gname, "hosts", hname), entry or {}))
    for hname, entry in (data.get("hosts") or {}).items():
        membership.setdefault(hname, []).append(("", ("hosts", hname), entry or {}))
    for hname, (prefix, settings) in side.hosts.items():
        membership[hname].append(("", prefix, settings))

    defaults: dict[str, Any] = {}
    for _, settings in layers_default:
        defaults = deep_merge(defaults, settings)
    _check_merged_size(src, defaults, membership)
    _refuse_group_conflicts(src, all_groups, side, data.get("hosts") or {})
    hosts: dict[str, Host] = {}
    layers_of: dict[str, list[tuple[Path_, dict[str, Any]]]] = {}
    problems: list[Problem] = []
    for hname, layers in membership.items():
        stack: list[tuple[Path_, dict[str, Any]]] = list(layers_default)
        merged: dict[str, Any] = copy.deepcopy(defaults)
        member_of: list[str] = []
        for gname, prefix, layer in layers:
            body = {k: v for k, v in layer.items() if k != "hosts"} if gname else layer
            if gname:
                member_of.append(gname)
            stack.append((prefix, body))
            merged = deep_merge(merged, body)
        merged["name"] = hname
        merged["groups"] = member_of
        layers_of[hname] = stack
        try:
            hosts[hname] = Host.model_validate(merged, context={"base": base or Path(".")})
        except ValidationError as exc:
            for err in exc.errors():
                loc = tuple(err["loc"])
                prefix = _provenance(stack, loc) or layers[-1][1]
                full = (*prefix, *loc)
                problems.append(
                    Problem(
                        src.position(full),
                        f"hosts.{hname}" + (f".{field_path(loc)}" if loc else ""),
                        explain(dict(err)),
                    )
                )
    if problems:
        raise InventoryError(problems)
    return Inventory(source=src, hosts=hosts, groups=groups, layers=layers_of)


def _refuse_group_conflicts(
    src: Source, all_groups: dict[str, Any], side: VarsFiles, own_entries: dict[str, Any]
) -> None:
    """A host's groups may not set one setting differently unless the host decides it."""
    host_groups: dict[str, list[tuple[str, list[Layer]]]] = {}
    for gname, group in all_groups.items():
        group = group or {}
        body = {k: v for k, v in group.items() if k != "hosts"}
        for hname, entry in (group.get("hosts") or {}).items():
            layers: list[Layer] = [(("groups", gname), body)]
            if gname in side.groups:
                layers.append(side.groups[gname])
            layers.append((("groups", gname, "hosts", hname), entry or {}))
            host_groups.setdefault(hname, []).append((gname, layers))
    host_own: dict[str, list[Layer]] = {}
    for hname, entry in own_entries.items():
        host_own.setdefault(hname, []).append((("hosts", hname), entry or {}))
    for hname, layer in side.hosts.items():
        host_own.setdefault(hname, []).append(layer)
    problems = group_conflicts(src, host_groups, host_own)
    if problems:
        raise InventoryError(problems)


def _check_merged_size(
    src: Source,
    defaults: dict[str, Any],
    membership: dict[str, list[tuple[str, Path_, dict[str, Any]]]],
) -> None:
    """Every host gets a copy of its defaults and groups: refuse a file whose few large
    layers would copy into millions of values (the YAML limits count the text once)."""
    sizes: dict[int, int] = {}

    def size(layer: dict[str, Any]) -> int:
        return len(layer) + sum(_size(v, sizes) for k, v in layer.items() if k != "hosts")

    total = 0
    for layers in membership.values():
        total += size(defaults) + sum(size(layer) for _, _, layer in layers)
        if total > MAX_MERGED:
            raise InventoryError(
                [
                    Problem(
                        src.position(("hosts",)),
                        "",
                        f"the hosts' merged settings hold more than {MAX_MERGED} values "
                        "(each host copies its defaults and groups): make the shared "
                        "layers smaller",
                    )
                ]
            )


def _size(value: Any, sizes: dict[int, int]) -> int:
    if id(value) not in sizes:
        if isinstance(value, dict):
            sizes[id(value)] = 1 + sum(_size(v, sizes) for v in value.values()) + len(value)
        elif isinstance(value, list):
            sizes[id(value)] = 1 + sum(_size(v, sizes) for v in value)
        else:
            return 1
    return sizes[id(value)]


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; anything else (lists included) is replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _provenance(stack: list[tuple[Path_, dict[str, Any]]], loc: Path_) -> Path_ | None:
    """The path prefix of the last layer that set `loc` (or its nearest parent)."""
    for depth in range(len(loc), 0, -1):
        for prefix, body in reversed(stack):
            node: Any = body
            for part in loc[:depth]:
                in_dict = isinstance(node, dict) and part in node
                in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
                if in_dict or in_list:
                    node = node[part]
                else:
                    break
            else:
                found: Path_ = prefix
                return found
    return None
