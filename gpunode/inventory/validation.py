"""Validate loaded YAML against a model; every problem becomes a `file:line:column` message."""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from gpunode.inventory.errors import InventoryError, Problem, explain, field_path
from gpunode.inventory.text import bad_strings
from gpunode.inventory.yamlpos import Path_, Source


def validate(src: Source, data: dict[str, Any], model: type[BaseModel]) -> None:
    """Refuse text that is not plain, then anything `model` refuses, every problem at once."""
    text_problems = [
        Problem(
            src.position(loc if is_key else (*loc, "<value>")) if loc else src.position(()),
            field_path(loc),
            problem,
        )
        for loc, is_key, problem in bad_strings(data)
    ]
    if text_problems:
        raise InventoryError(text_problems)
    try:
        model.model_validate(data)
    except ValidationError as exc:
        raise InventoryError(problems(exc, src, (), model)) from None


def problems(
    exc: ValidationError, src: Source, prefix: Path_, root: type[BaseModel]
) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not _is_union_tag(p))
        full = (*prefix, *loc)
        position = src.position((*full, "<value>") if err["type"] != "extra_forbidden" else full)
        if (*full, "<value>") not in src.positions:
            position = src.position(full)
        known = _known_keys(root, loc[:-1]) if err["type"] == "extra_forbidden" else ()
        written = src.token_at(position) if err["type"] == "string_type" else ""
        out.append(Problem(position, field_path(full), explain(dict(err), known, written)))
    return out


def _is_union_tag(part: str | int) -> bool:
    # pydantic puts the chosen union member's name into `loc`; it means nothing to users.
    if not isinstance(part, str):
        return False
    return part[:1].isupper() or part in {"str", "int", "float", "bool", "list[str]"}


def _known_keys(root: type[BaseModel], loc: Iterable[str | int]) -> list[str]:
    """Field names allowed at `loc`; free-form levels (group and host names) are stepped over."""
    current: Any = root
    in_dict = False
    for part in loc:
        if in_dict or isinstance(part, int):
            in_dict = False
            continue
        fields = getattr(current, "model_fields", {})
        if part not in fields:
            return []
        ann = fields[part].annotation
        in_dict = typing.get_origin(ann) is dict
        current = _model_in(typing.get_args(ann)[1] if in_dict else ann)
    return sorted(getattr(current, "model_fields", {}).keys())


def _model_in(ann: Any) -> Any:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in typing.get_args(ann):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
