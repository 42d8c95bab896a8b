"""docs/inventory.md, rendered from the inventory's pydantic models: every field with its
type, default and description (the attribute docstrings in gpunode/inventory/model.py)."""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpunode.inventory.model import (
    PATTERN_HINTS,
    Document,
    GroupEntry,
    HostEntry,
    Settings,
    described,
)
from gpunode.roles.ops.reference import type_text

# The inventory's fields described from their docstrings (left out of a plain import)
described()


def field_type(annotation: Any, metadata: list[Any] | tuple[Any, ...] = ()) -> str:
    """A field's type as an inventory author reads it."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *meta = get_args(annotation)
        return field_type(base, meta)
    if origin is Literal:
        return "one of " + ", ".join(f"`{v}`" for v in get_args(annotation))
    if origin is dict:
        key, value = get_args(annotation)
        return f"mapping to {field_type(value)} (keys: {field_type(key)})"
    if origin in (Union, types.UnionType):
        parts = [a for a in get_args(annotation) if a is not type(None)]
        text = " or ".join(field_type(a) for a in parts)
        return f"{text}; or null" if len(parts) < len(get_args(annotation)) else text
    if origin is list:
        return "list of " + field_type(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    text = "number" if annotation is float else type_text(annotation, metadata)
    bounds = [
        f"{sign} {getattr(m, attr)}"
        for m in metadata
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
        if getattr(m, attr, None) is not None
    ]
    if bounds:
        text += f" ({', '.join(bounds)})"
    pattern = next((getattr(m, "pattern", None) for m in metadata if hasattr(m, "pattern")), None)
    if pattern is None:
        return text
    hint = PATTERN_HINTS.get(pattern)
    if hint:
        return f"string: {hint}"
    return f"{text} matching `^{pattern.removeprefix(chr(92) + 'A').removesuffix(chr(92) + 'Z')}$`"


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(its defaults)"
    return f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """root and every model its fields hold, each once, in the order first met."""
    seen: dict[type[BaseModel], None] = {}

    def walk(annotation: Any) -> None:
        is_model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        if is_model and annotation not in seen:
            seen[annotation] = None
            for info in annotation.model_fields.values():
                walk(info.annotation)
        for arg in get_args(annotation):
            walk(arg)

    walk(root)
    return list(seen)


def _model(model: type[BaseModel]) -> Iterator[str]:
    yield f"## {model.__name__}"
    yield ""
    if model.__doc__ and model.__doc__ is not BaseModel.__doc__:
        yield inspect.cleandoc(model.__doc__)
        yield ""
    if model in (HostEntry, GroupEntry):
        yield "Everything in [Settings](#settings), and:"
        yield ""
    yield "| key | type | default | description |"
    yield "| --- | --- | --- | --- |"
    inherited = Settings.model_fields if model in (HostEntry, GroupEntry) else {}
    for name, info in model.model_fields.items():
        if name in inherited:
            continue
        kind = _cell(field_type(info.annotation, info.metadata))
        yield f"| `{name}` | {kind} | {_default(info)} | {_cell(info.description or '')} |"
    yield ""


def markdown(command: str) -> str:
    lines = [
        "# The inventory",
        "",
        f"<!-- Generated from gpunode/inventory/model.py: `{command}`. Do not edit. -->",
        "",
        "An inventory is one YAML file: `defaults` (settings for every host), `groups` (each",
        "with settings and `hosts`) and `hosts`. A host's settings merge from `defaults`, then",
        "each group it is in (in the order written), then its entry under its group, then its",
        "entry under `hosts`: later layers win, mappings merge key by key, lists are replaced.",
        "Two groups of one host may not set the same setting differently (nothing says which",
        "one means it): that is refused, naming both places, unless the host's own entry",
        "under `hosts` (or its host_vars file) sets it.",
        "",
        "Beside the inventory file, `group_vars/<group>.yaml` and `host_vars/<host>.yaml`",
        "(or `.yml`) are read as Ansible reads them: `group_vars/all.yaml` wins over",
        "`defaults`, a group's file over the group's settings in the inventory, a host's",
        "file over everything else. A file for a group or host the inventory does not have",
        "is refused (a misspelt name would otherwise do nothing), with the name it is",
        "closest to. Each file holds [Settings](#settings) (a host's file may also set",
        "`address`); a mistake in one is reported at its own `file:line:column`.",
        "",
        "Every model below refuses unknown keys, and nothing is coerced: versions are quoted",
        "strings, booleans are `true`/`false`. `gpunode schema` prints the same shape as a",
        "JSON Schema; `gpunode inventory import` writes an inventory from Ansible's.",
        "",
    ]
    for model in _models(Document):
        lines += _model(model)
    return "\n".join(lines).rstrip("\n") + "\n"
