"""Jinja2 for roles, in a sandbox: StrictUndefined everywhere, shell quoting as a filter.

A string that is exactly one `{{ expression }}` evaluates to the expression's
value (a list stays a list, "550" stays a string); any other string renders as
text. Values that reach a shell go through the `q` filter or argv lists.

Roles (a site's own included) are data, not code: they render in Jinja's immutable
sandbox, so an expression can read the context it is given but cannot reach Python's
internals (`__globals__`, `__class__`...), the controller's environment or files, or
change a list or mapping it was given. Breaking a rule raises jinja2.SecurityError.
"""

from __future__ import annotations

import operator
import re
import shlex
from pathlib import Path
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gpunode.memo import once

_SINGLE = re.compile(r"\A\{\{(?P<expr>.*)\}\}\Z", re.S)
# A rendered value is an argument or a file, not a payload: no string, list or number
# a role needs comes near these (they keep a template from eating the controller's memory).
MAX_REPEAT = 1_000_000
MAX_EXPONENT = 4096


class RoleSandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with `*` and `**` bounded as `range()` already is."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "*":
            for seq, n in ((left, right), (right, left)):
                sized = isinstance(seq, (str, list, tuple)) and isinstance(n, int)
                if sized and len(seq) * n > MAX_REPEAT:
                    raise SecurityError(f"a repeat longer than {MAX_REPEAT} is refused")
            return operator.mul(left, right)
        if operator_ == "**":
            if isinstance(right, int) and abs(right) > MAX_EXPONENT:
                raise SecurityError(f"an exponent above {MAX_EXPONENT} is refused")
            return operator.pow(left, right)
        return super().call_binop(context, operator_, left, right)


@once
def _env(templates: Path | None) -> jinja2.Environment:
    loader = jinja2.FileSystemLoader(str(templates)) if templates else None
    env = RoleSandbox(
        undefined=jinja2.StrictUndefined,
        loader=loader,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = shlex.quote
    env.filters["pin"] = _pin
    return env


@once
def _expression(expr: str) -> Any:
    # Compiling is most of the cost of a plan; each role's few expressions compile once.
    return _env(None).compile_expression(expr, undefined_to_none=False)


@once
def _template(source: str) -> jinja2.Template:
    return _env(None).from_string(source)


def evaluate(expr: str, ctx: dict[str, Any]) -> Any:
    value = _expression(expr)(**ctx)
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises here, naming what is undefined (or unsafe)
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
