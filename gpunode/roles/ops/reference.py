"""The operations reference (docs/operations.md), generated from the operations themselves:
each one's docstring, its argument model (type, shape, default, description) and its YAML
example.

    python -m gpunode.roles.ops.reference docs/operations.md   # write it; no path: print it
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpunode.roles.ops import OPERATIONS, Operation

COMMAND = "python -m gpunode.roles.ops.reference docs/operations.md"

_EXAMPLE = re.compile(r"^```yaml\n(.*?)^```\n?", re.M | re.S)

_TASK_KEYS = (
    ("name", "The task's title in plans and events (rendered with the role's variables)."),
    ("op", "The operation: one of those below."),
    ("when", "A Jinja condition; the task is left out where it is false."),
    ("loop", "A list (or mapping: `[key, value]` items) the task runs for, as `item`."),
    ("tags", "Labels that `plan --tags` and `apply --tags` select changes by."),
    ("on_change", "Shell commands appended to the task's change: they run only when it does."),
)


def split_doc(op: Operation) -> tuple[str, str]:
    """The operation's docstring without its example, and the example's YAML."""
    doc = inspect.cleandoc(type(op).__doc__ or "")
    found = _EXAMPLE.search(doc)
    if found is None:
        return doc, ""
    text = (doc[: found.start()] + doc[found.end() :]).strip()
    return text, found.group(1)


def _shape(metadata: list[Any]) -> str:
    """What the values' validators accept, from their docstrings."""
    for item in metadata:
        func = getattr(item, "func", None)
        if func is not None and func.__doc__:
            return str(func.__doc__).strip()
    return ""


def type_text(annotation: Any, metadata: list[Any] | tuple[Any, ...] = ()) -> str:
    """A type as a role author reads it: `string: a Debian package name (...)`."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *meta = get_args(annotation)
        return type_text(base, meta)
    if origin in (Union, types.UnionType):
        parts = [a for a in get_args(annotation) if a is not type(None)]
        return " or ".join(type_text(a) for a in parts)
    if origin in (list, tuple):
        return "list of " + type_text(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"mapping ({annotation.__name__}, below)"
    name = {str: "string", bool: "boolean", int: "integer"}.get(annotation, str(annotation))
    shape = _shape(list(metadata))
    return f"{name}: {shape}" if shape else name


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default is None:
        return "none"
    value = list(info.default) if isinstance(info.default, tuple) else info.default
    return f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(model: type[BaseModel]) -> Iterator[str]:
    yield "| argument | type | default | description |"
    yield "| --- | --- | --- | --- |"
    for name, info in model.model_fields.items():
        kind = _cell(type_text(info.annotation, info.metadata))
        yield f"| `{name}` | {kind} | {_default(info)} | {_cell(info.description or '')} |"


def _nested(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """The mappings an argument model holds (a package's {name, version}), in order."""

    def walk(annotation: Any) -> Iterator[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield annotation
        for arg in get_args(annotation):
            yield from walk(arg)

    for info in model.model_fields.values():
        yield from walk(info.annotation)


def _operation(op: Operation) -> Iterator[str]:
    text, example = split_doc(op)
    yield f"## {op.name}"
    yield ""
    yield text
    yield ""
    yield from _table(op.args_model)
    for sub in _nested(op.args_model):
        yield ""
        yield f"{sub.__name__}: {inspect.cleandoc(sub.__doc__ or '')}"
        yield ""
        yield from _table(sub)
    if example:
        yield ""
        yield "```yaml"
        yield example.rstrip("\n")
        yield "```"
    yield ""


def markdown() -> str:
    lines = [
        "# Operations",
        "",
        f"<!-- Generated from gpunode/roles/ops: `{COMMAND}`. Do not edit. -->",
        "",
        "A role's `tasks.yaml` is a list of tasks; each names an operation (`op:`) and gives",
        "its arguments beside the keys every task has. An operation compares its arguments",
        "with the host's facts (and a few batched checks) and yields a change only where they",
        "differ: a host that already has what the task describes gets nothing.",
        "",
        "| key | meaning |",
        "| --- | --- |",
        *(f"| `{key}` | {text} |" for key, text in _TASK_KEYS),
        "",
        "Arguments are checked when the task is read: a value outside its shape refuses the",
        "host, naming the task's file and line.",
        "",
        " · ".join(f"[{name}](#{name})" for name in OPERATIONS),
        "",
    ]
    for op in OPERATIONS.values():
        lines += _operation(op)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = markdown()
    if not argv:
        sys.stdout.write(text)
        return 0
    Path(argv[0]).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
