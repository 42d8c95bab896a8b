"""Jinja2 for roles: StrictUndefined everywhere, shell quoting as a filter.

A string that is exactly one `{{ expression }}` evaluates to the expression's
value (a list stays a list, "550" stays a string); any other string renders as
text. Values that reach a shell go through the `q` filter or argv lists.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

_SINGLE = re.compile(r"\A\{\{(?P<expr>.*)\}\}\Z", re.S)


@cache
def _env(templates: Path | None) -> jinja2.Environment:
    loader = jinja2.FileSystemLoader(str(templates)) if templates else None
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        loader=loader,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = shlex.quote
    env.filters["pin"] = _pin
    return env


@cache
def _expression(expr: str) -> Any:
    # Compiling is most of the cost of a plan; each role's few expressions compile once.
    return _env(None).compile_expression(expr, undefined_to_none=False)


@cache
def _template(source: str) -> jinja2.Template:
    return _env(None).from_string(source)


def evaluate(expr: str, ctx: dict[str, Any]) -> Any:
    value = _expression(expr)(**ctx)
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises here, naming what is undefined
    return value


def render(value: Any, ctx: dict[str, Any]) -> Any:
    if isinstance(value, str):
        if "{{" not in value and "{%" not in value:
            return value
        # only a value that is one expression and nothing else keeps its type: "{{ x }}\n"
        # is text, and its newline stays
        single = _SINGLE.match(value)
        if single and "{{" not in single.group("expr"):
            return evaluate(single.group("expr"), ctx)
        return _template(value).render(**ctx)
    if isinstance(value, list):
        return [render(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: render(v, ctx) for k, v in value.items()}
    return value


def render_template(templates: Path, name: str, ctx: dict[str, Any]) -> str:
    return _env(templates).get_template(name).render(**ctx)


def _pin(names: list[str], version: str | None) -> list[str]:
    """["libnccl2"] | pin("2.21.5-1+cuda12.4") -> ["libnccl2=2.21.5-1+cuda12.4"]"""
    return [f"{n}={version}" if version else n for n in names]
