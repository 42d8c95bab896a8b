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

import functools
import operator
import os
import re
import shlex
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gpunode.memo import once

T = TypeVar("T")

_SINGLE = re.compile(r"\A\{\{(?P<expr>.*)\}\}\Z", re.S)
# A rendered value is an argument or a file, not a payload: no string, list or number
# a role needs comes near these (they keep a template from eating the controller's memory).
MAX_REPEAT = 1_000_000
MAX_EXPONENT = 4096
# One render (a template file, a task argument, an expression) may take this long and add
# this much to the controller's memory; a loop over loops or a string doubled in a loop
# gets round the size limits above, not round these.
MAX_SECONDS = 2.0
MAX_GROWTH = 64 * 2**20
_PAGE = os.sysconf("SC_PAGE_SIZE")


_statm: list[int] = []  # this process's /proc/self/statm, opened once (pread: no offset shared)


def _rss() -> int:
    """Resident memory in bytes (0 where /proc has none)."""
    if not _statm:
        try:
            _statm.append(os.open("/proc/self/statm", os.O_RDONLY))
        except OSError:
            _statm.append(-1)
    if _statm[0] < 0:
        return 0
    return int(os.pread(_statm[0], 64, 0).split()[1]) * _PAGE


class _Budget:
    """A trace function for the template code of one render (this thread only): between
    two lines it stops a render past its time or memory budget (memory every 16 lines,
    the size limits bounding what one line may add)."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + MAX_SECONDS
        self.limit = 0
        self.events = 0

    def calls(self, frame: FrameType, event: str, arg: Any) -> Any:
        # every call (a filter's generator resumed per item, too) counts; the lines of code
        # Jinja compiled for the sandbox are followed, never Python's own
        self.check()
        return self.lines if isinstance(frame.f_globals.get("environment"), RoleSandbox) else None

    def lines(self, frame: FrameType, event: str, arg: Any) -> Any:
        self.check()
        return self.lines

    def check(self) -> None:
        self.events += 1
        if self.events % 16:
            return
        if time.monotonic() > self.deadline:
            raise SecurityError(f"a render longer than {MAX_SECONDS:g} s is refused")
        if not self.limit:
            self.limit = _rss() + MAX_GROWTH
        elif _rss() > self.limit:
            raise SecurityError(f"a render using more than {MAX_GROWTH >> 20} MiB is refused")


def _bounded(render: Callable[[], T]) -> T:
    before = sys.gettrace()
    sys.settrace(_Budget().calls)
    try:
        return render()
    finally:
        sys.settrace(before)


_WIDE = re.compile(r"[%{][^%{}]*?[0-9]{7}")  # a %- or {}-format width of 7+ digits


def _refuse_payloads(obj: Any, args: Iterable[Any]) -> None:
    """Refuse a str method asked for a payload no role needs (`'x'.ljust(10**9)`,
    `'{:>999999999}'.format(1)`, `s.replace('', t)` on long strings) before it allocates."""
    if not isinstance(obj, str):
        return
    for a in args:
        if isinstance(a, int) and not isinstance(a, bool) and abs(a) > MAX_REPEAT:
            raise SecurityError(f"a number above {MAX_REPEAT} given to a str method is refused")
    if _WIDE.search(obj):
        raise SecurityError("a format width above 999999 is refused")


def _bounded_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    skip = 2 if getattr(fn, "jinja_pass_arg", None) else 1  # the context, then the value

    @functools.wraps(fn)  # keeps Jinja's pass_context/pass_environment marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        value = args[skip - 1] if len(args) >= skip else None
        pretend = value if fn.__name__ == "do_format" else ""  # `"%9999999d" | format(1)`
        _refuse_payloads(pretend, [*args[skip:], *kwargs.values()])
        return fn(*args, **kwargs)

    return bounded


# A short expression or template made only of these does work linear in the values it is
# given, and never more: no loop, no macro, no call but a few methods, no operator that
# repeats (`*`, `+` and `%` are the sandbox's, bounded per use, but not when chained), no
# filter that can grow its input or combine two values into more than both (`q`, `join`,
# `pin`, `string`, `map`, `format`: traced). `~` is bounded per use (bounded_join), and a
# short template has few. It runs without the trace budget (a render's costliest part:
# a Python call for every line and call of Jinja's code); anything else is traced.
_LINEAR_NODES = frozenset(
    """Template Output TemplateData Assign Name Const Getattr Getitem Slice Compare Operand
    And Or Not Neg Pos CondExpr If List Tuple Dict Pair Concat MarkSafe MarkSafeIfAutoescape
    """.split()  # noqa: SIM905 (names, as Jinja's nodes are called)
)
_LINEAR_FILTERS = frozenset(
    """list int float lower upper trim length count first last default d bool sort unique
    reverse items""".split()  # noqa: SIM905
)
_LINEAR_TESTS = frozenset(
    """defined undefined none string number integer float boolean true false mapping sequence
    iterable eq ne equalto sameas in lower upper""".split()  # noqa: SIM905
)
# a mapping's get; the others only with constant arguments (`s.strip(t)` is len(s) * len(t))
_LINEAR_METHODS = frozenset(
    """get strip rstrip lstrip lower upper startswith endswith""".split()  # noqa: SIM905
)
MAX_LINEAR_NODES = 64  # a long chain of linear steps is traced all the same
_compiled = threading.local()  # the last compile's verdict, in the thread that compiled


def _linear(node: nodes.Node) -> bool:
    kind = type(node).__name__
    if kind in _LINEAR_NODES:
        return True
    if isinstance(node, (nodes.Filter, nodes.Test, nodes.Call)):
        if node.kwargs or node.dyn_args or node.dyn_kwargs:
            return False
        if isinstance(node, nodes.Call):
            method = node.node
            if not isinstance(method, nodes.Getattr) or method.attr not in _LINEAR_METHODS:
                return False
            return method.attr == "get" or all(isinstance(a, nodes.Const) for a in node.args)
        if isinstance(node, nodes.Test):
            return node.name in _LINEAR_TESTS
        if node.name == "replace":  # never longer than its input: a constant, no longer
            old, new = (a.value if isinstance(a, nodes.Const) else None for a in node.args[:2])
            return (
                len(node.args) == 2
                and isinstance(old, str)
                and isinstance(new, str)
                and len(old) > 0
                and len(new) <= len(old)
            )
        return node.name in _LINEAR_FILTERS
    return False


class _BoundedCodeGenerator(CodeGenerator):
    """`a ~ b` through the environment's `bounded_join`, sized like `+`; and, as it compiles,
    whether the template is linear (`_linear`), for `_compiling`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._nodes = 0
        self._is_linear = True

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        self._nodes += 1
        self._is_linear = self._is_linear and _linear(node)
        return super().visit(node, *args, **kwargs)

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        super().visit_Template(node, frame)
        _compiled.linear = self._is_linear and self._nodes <= MAX_LINEAR_NODES

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class RoleSandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with `*` and `**` bounded as `range()` already is."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _BoundedCodeGenerator

    @staticmethod
    def bounded_join(parts: Iterable[Any]) -> str:
        texts = [str(p) for p in parts]
        if sum(map(len, texts)) > MAX_REPEAT:
            raise SecurityError(f"a concatenation longer than {MAX_REPEAT} is refused")
        return "".join(texts)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        _refuse_payloads(getattr(value, "__self__", None), ())
        return super().wrap_str_format(value)

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
        if operator_ == "%":
            _refuse_payloads(left, ())
        if operator_ == "+":
            sized = isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple))
            if sized and len(left) + len(right) > MAX_REPEAT:
                raise SecurityError(f"a concatenation longer than {MAX_REPEAT} is refused")
        return super().call_binop(context, operator_, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        owner = getattr(__obj, "__self__", None)
        _refuse_payloads(owner, [*args, *kwargs.values()])
        name = getattr(__obj, "__name__", "")
        if isinstance(owner, str) and name == "replace" and len(args) >= 2:
            old, new = str(args[0]), str(args[1])
            grows = (owner.count(old) if old else len(owner) + 1) * len(new)
            if grows > MAX_REPEAT:
                raise SecurityError(f"a replace longer than {MAX_REPEAT} is refused")
        return super().call(__context, __obj, *args, **kwargs)


@once
def _env(templates: Path | None) -> jinja2.Environment:
    loader = jinja2.FileSystemLoader(str(templates)) if templates else None
    env = RoleSandbox(
        undefined=jinja2.StrictUndefined,
        loader=loader,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters = {name: _bounded_filter(f) for name, f in env.filters.items()}
    env.filters["q"] = shlex.quote
    env.filters["pin"] = _pin
    return env


def _compiling(make: Callable[[], T]) -> tuple[T, bool]:
    """What `make` compiles, and whether it is linear (runs without the trace budget)."""
    _compiled.linear = False
    made = make()
    return made, _compiled.linear


@once
def _expression(expr: str) -> tuple[Any, bool]:
    # Compiling is most of the cost of a plan; each role's few expressions compile once.
    return _compiling(lambda: _env(None).compile_expression(expr, undefined_to_none=False))


@once
def _template(source: str) -> tuple[jinja2.Template, bool]:
    return _compiling(lambda: _env(None).from_string(source))


# A template file's verdict, kept with the template Jinja keeps (and drops when it reloads)
_LINEAR_FILES: weakref.WeakKeyDictionary[jinja2.Template, bool] = weakref.WeakKeyDictionary()


_PLAIN = re.compile(r"[\w\s.\[\]'\"]*")  # names, attributes, items: no call, filter or operator


def evaluate(expr: str, ctx: dict[str, Any]) -> Any:
    compiled, linear = _expression(expr)
    if linear or _PLAIN.fullmatch(expr):  # no work to bound (most of a role's values)
        value = compiled(**ctx)
    else:
        value = _bounded(lambda: compiled(**ctx))
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises here, naming what is undefined (or unsafe)
    return value


def templated(text: str) -> bool:
    """Whether `text` has anything for Jinja: an expression or a statement."""
    return "{{" in text or "{%" in text


def _single(text: str) -> str | None:
    """The expression of a value that is one expression and nothing else (it keeps its
    type: "{{ x }}\n" is text, and its newline stays), else None."""
    single = _SINGLE.match(text)
    return single.group("expr") if single and "{{" not in single.group("expr") else None


def render(value: Any, ctx: dict[str, Any]) -> Any:
    if isinstance(value, str):
        if not templated(value):
            return value
        if (expr := _single(value)) is not None:
            return evaluate(expr, ctx)
        template, linear = _template(value)
        return template.render(**ctx) if linear else _bounded(lambda: template.render(**ctx))
    if isinstance(value, list):
        return [render(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: render(v, ctx) for k, v in value.items()}
    return value


def render_template(templates: Path, name: str, ctx: dict[str, Any]) -> str:
    """The role's template file rendered with `ctx`. A render is a pure function of the
    file and the values it reads: one whose values are all plain data (text, numbers,
    tuples and mappings of them) and equal to an earlier render's, byte for byte, is that
    render's text (fifty hosts of one stack render each file once; a host's own value,
    its facts, a pydantic model, renders again). The file is read once a process, as the
    roles' other files are (roles.loader)."""
    free = _FREE.get((templates, name))
    key = _plain_key(templates, name, free, ctx) if free is not None else None
    if key is not None and (text := _RENDERED.get(key)) is not None:
        return text
    template, linear = _file_template(templates, name)
    text = template.render(**ctx) if linear else _bounded(lambda: template.render(**ctx))
    if free is None:
        free = _FREE.setdefault((templates, name), _free_names(templates, name))
        key = _plain_key(templates, name, free, ctx)
    if key is not None:
        if len(_RENDERED) >= MAX_RENDERS_KEPT:
            _RENDERED.clear()
        _RENDERED[key] = text
    return text


def _file_template(templates: Path, name: str) -> tuple[jinja2.Template, bool]:
    _own_file(templates, name)
    template, linear = _compiling(lambda: _env(templates).get_template(name))
    if template in _LINEAR_FILES:  # Jinja's cached template: compiled earlier, judged then
        return template, _LINEAR_FILES[template]
    _LINEAR_FILES[template] = linear
    return template, linear


def precompile(value: Any) -> None:
    """Compile what `render(value, ...)` would, rendering nothing (the caches above keep
    it), so that a render after this only renders. What does not compile is left for its
    render to report, with its place."""
    try:
        if isinstance(value, str) and templated(value):
            if (expr := _single(value)) is not None:
                _expression(expr)
            else:
                _template(value)
        elif isinstance(value, list):
            for v in value:
                precompile(v)
        elif isinstance(value, dict):
            for v in value.values():
                precompile(v)
    except Exception:  # the render reports it, where it is
        return


def precompile_file(templates: Path, name: str) -> None:
    """`precompile` for the template file `name` of `templates` (`render_template`'s)."""
    try:
        _file_template(templates, name)
    except Exception:  # the render reports it, where it is
        return


MAX_RENDERS_KEPT = 1024
_RENDERED: dict[tuple[Any, ...], str] = {}
"""Template files' texts by (folder, name, the plain values they read)."""
_FREE: dict[tuple[Path, str], frozenset[str] | None] = {}
"""The names a template file reads from its context; None: it includes another file."""


def _free_names(templates: Path, name: str) -> frozenset[str] | None:
    from jinja2 import meta

    env = _env(templates)
    assert env.loader is not None
    ast = env.parse(env.loader.get_source(env, name)[0])
    if any(True for _ in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport,
                                        nodes.Extends))):  # fmt: skip
        return None  # the other file's names are not this one's
    return frozenset(meta.find_undeclared_variables(ast))


def _plain_key(
    templates: Path, name: str, free: frozenset[str] | None, ctx: dict[str, Any]
) -> tuple[Any, ...] | None:
    if free is None:
        return None
    values = []
    for n in sorted(free):
        v = _plain(ctx.get(n, _plain))
        if v is None:
            return None
        values.append((n, v))
    return (str(templates), name, tuple(values))


_PLAIN_ATOMS = (str, int, float, bool, type(None))


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as a key that equals another's only for the same data of the same types;
    None when it is not plain data (a model, an object, too deep)."""
    if value is _plain:
        return ("undefined",)  # a name the context lacks: a global of Jinja's, or an error
    kind = type(value)
    if kind in _PLAIN_ATOMS:
        return (kind, value)
    if depth > 8:
        return None
    if kind in (tuple, list) or (isinstance(value, tuple) and hasattr(kind, "_fields")):
        items = [_plain(v, depth + 1) for v in value]
        return None if None in items else (kind, tuple(items))
    if kind is dict:
        pairs = [(_plain(k, depth + 1), _plain(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return (kind, tuple(pairs))
    return None


def _own_file(templates: Path, name: str) -> None:
    """A template is the role's own, world-readable file: never, through a symlink, a file
    elsewhere on the controller (a key) whose content would go to every host."""
    path = templates / name
    if not path.exists():
        return  # Jinja's TemplateNotFound says so
    real, folder = path.resolve(), templates.resolve()
    if folder not in real.parents:
        raise SecurityError(f"{name} is {real}, outside the role's {folder}: copy it there")
    if not os.stat(real).st_mode & 0o004:
        raise SecurityError(
            f"{name} is not world-readable: a private file is not sent to hosts as a template"
        )


def _pin(names: list[str], version: str | None) -> list[str]:
    """["libnccl2"] | pin("2.21.5-1+cuda12.4") -> ["libnccl2=2.21.5-1+cuda12.4"]"""
    return [f"{n}={version}" if version else n for n in names]
