"""Walk a host's roles and tasks: render arguments, evaluate `when`, expand `loop`.

The same walk serves three questions: which files the facts round trip should
hash (`paths_only`: only the arguments naming them are rendered), which probes the
operations need (`probes_only`: the tasks of operations that have none are not rendered),
and (with facts) which changes to make.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import ValidationError

from gpunode.compat import TEMPLATE_FUNCTIONS
from gpunode.components import COMPONENTS, PRELUDE, repository
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host
from gpunode.resolve.resolver import Resolved
from gpunode.roles.loader import Role, RoleError, Task, find_role, search_path
from gpunode.roles.ops import OPERATIONS, Operation
from gpunode.roles.render import precompile as precompile_value
from gpunode.roles.render import precompile_file, render, render_template, templated

_COMPAT = SimpleNamespace(**TEMPLATE_FUNCTIONS)


def builtin_roles(host: Host) -> list[str]:
    """The built-in roles a stack asks for, in the order they must run: the prelude while a
    component from NVIDIA's repository is declared; each declared component's role in the
    declaration's order (gpunode.components), after the role of its repository (where
    repos sets one); then the stack's extra roles."""
    declared = [c for c in COMPONENTS if getattr(host.stack, c.field)]
    # first: no unattended upgrade moves the stack while it is being installed
    names = list(PRELUDE) if any(c.repository == "nvidia" for c in declared) else []
    for c in declared:
        if c.repository and getattr(host.repos, c.repository):
            names += [r for r in (repository(c.repository).role,) if r not in names]
        if c.when is None or getattr(getattr(host.stack, c.field), c.when):
            names.append(c.role)
    return names + [r for r in host.stack.roles if r not in names]


def base_context(host: Host, facts: HostFacts, resolved: Resolved | None = None) -> dict[str, Any]:
    return {
        "host": host,
        "resolved": resolved or Resolved(),
        "stack": host.stack,
        "repos": host.repos,
        "gpus": host.gpus,
        "facts": facts,
        "compat": _COMPAT,
        "vars": dict(host.stack.vars),
        # the components the stack declares, as gpunode.components declares them
        "components": [c for c in COMPONENTS if getattr(host.stack, c.field)],
    }


@dataclass
class Planned:
    role: Role
    task: Task
    op: Operation
    args: Any
    ctx: dict[str, Any]
    title: str

    @property
    def where(self) -> str:
        return str(self.task.position)


def walk(
    host: Host,
    facts: HostFacts,
    search: tuple[Path, ...],
    *,
    guess: bool = False,
    resolved: Resolved | None = None,
    only: Collection[str] | None = None,
    paths_only: bool = False,
    probes_only: bool = False,
) -> Iterator[Planned]:
    """Every task that applies. `guess`: facts are not known yet, so take every task whatever
    its `when`, and skip the ones that cannot be rendered without facts. `resolved`: the
    exact versions the host's specs stand for (gpunode.resolve); without them (reading
    paths and probes) tasks that need them are skipped. `paths_only`: every task whose
    operation reads files (Operation.path_args), whatever its `when`, with only those
    arguments rendered; a render error is the role's (RoleError), except, with `guess`, a
    value only the facts give: that task's files are hashed once the plan names them.
    `probes_only` (lenient walks only): a task whose operation never probes (a file, a
    template, an apt package) is passed by unrendered, and a role with no other task is
    passed by whole: what it yields would give no probe, and its template file is the
    walk's largest render."""
    lenient = guess or resolved is None
    if probes_only and not lenient:
        raise ValueError("probes_only is for the lenient walks (no resolved versions)")
    base = base_context(host, facts, resolved)
    for name in builtin_roles(host):
        if only is not None and name not in only:
            continue
        role = find_role(name, search, host.stack.replace_builtin_roles)
        if probes_only and all(_never_probes(OPERATIONS.get(t.op)) for t in role.tasks):
            continue  # nothing to ask the host: not even its defaults are rendered
        # The inventory's variables stay under `vars`: they never replace a role's defaults
        # (a built-in role's versions, paths and package names are its own).
        ctx = dict(base)
        for key, value in role.defaults.items():
            ctx[key] = _render(value, ctx, f"{role.path / 'defaults.yaml'}: {key}")
        for task in role.tasks:
            if paths_only:
                yield from _paths(role, task, ctx, guess)
                continue
            if not lenient:
                yield from _task(role, task, ctx)
                continue
            if probes_only and _never_probes(OPERATIONS.get(task.op)):
                continue
            try:
                yield from _task(role, task, ctx, guess=guess)
            except (RoleError, ValueError, TypeError, AttributeError):
                continue


def precompile(host: Host, search: tuple[Path, ...] | None) -> None:
    """Compile every expression and template of the host's roles, rendering nothing: run
    while the host's facts are read, the plan after them only renders. A role that cannot
    be found or read is left for the plan's walk to report."""
    where, replace = search or search_path(None), host.stack.replace_builtin_roles
    try:
        roles = [find_role(name, where, replace) for name in builtin_roles(host)]
    except (RoleError, OSError):
        return
    for role in roles:
        with _CLAIM:  # fifty hosts start together: one thread compiles a role, once
            if _PRECOMPILED.get(role.path) is role:
                continue  # another host of these roles does it, or did
            _PRECOMPILED[role.path] = role
        for value in role.defaults.values():
            precompile_value(value)
        for task in role.tasks:
            op, src = OPERATIONS.get(task.op), task.args.get("src")
            renders = op is not None and op.renders_template
            if renders and isinstance(src, str) and not templated(src):  # else: as rendered
                precompile_file(role.templates, src)
            if task.when is not None:
                precompile_value(_condition(task.when))
            precompile_value([task.loop, task.args, task.name])


_PRECOMPILED: dict[Path, Role] = {}
"""Each role folder's role as last taken to precompile (a role read again is a new object).
A plan that comes before its compile is done compiles what it needs itself (render's
memos make each value once, whichever thread asks first)."""
_CLAIM = threading.Lock()


def _op(task: Task) -> Operation:
    op = OPERATIONS.get(task.op)
    if op is None:
        known = ", ".join(sorted(OPERATIONS))
        raise RoleError(f"{task.position}: unknown op {task.op!r}: use one of {known}")
    return op


def _never_probes(op: Operation | None) -> bool:
    """An operation that keeps Operation.probes: it asks the host nothing before planning."""
    return op is not None and type(op).probes is Operation.probes


def _items(task: Task, ctx: dict[str, Any], where: str) -> list[Any]:
    if task.loop is None:
        return [None]
    loop = _render(task.loop, ctx, f"{where}: loop")
    if isinstance(loop, dict):
        return list(loop.items())
    if isinstance(loop, (str, bytes)) or not isinstance(loop, Iterable):
        raise RoleError(f"{where}: loop: a list or a mapping is needed, not {loop!r}")
    return list(loop)


def _paths(role: Role, task: Task, ctx: dict[str, Any], guess: bool) -> Iterator[Planned]:
    """The task as Operation.paths reads it: its path-bearing arguments alone rendered."""
    op = _op(task)
    if not op.path_args:
        return
    where = f"{task.position} (task {task.name!r})"
    try:
        items = _items(task, ctx, where)
        rendered = []
        for item in items:
            here = {**ctx, "item": item} if task.loop is not None else ctx
            wanted = {k: v for k, v in task.args.items() if k in op.path_args}
            rendered.append((here, _render(wanted, here, where)))
    except UnknownValue:
        if guess:
            return  # named by the plan, once the facts are known (HostPlan.reads)
        raise
    for here, raw in rendered:
        try:
            args = op.parse_paths(raw)
        except ValidationError as exc:
            raise RoleError(f"{task.position}: {task.op}: {_problems(exc)}") from None
        yield Planned(role, task, op, args, here, task.name)


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'args'}: {e['msg']}" for e in exc.errors()
    )


def _condition(when: object) -> str:
    """A task's `when:` as the expression rendered for it."""
    return "{{ " + str(when) + " }}"


def _task(role: Role, task: Task, ctx: dict[str, Any], guess: bool = False) -> Iterator[Planned]:
    op = _op(task)
    where = f"{task.position} (task {task.name!r})"
    for item in _items(task, ctx, where):
        here = {**ctx, "item": item} if task.loop is not None else ctx
        if (
            task.when is not None
            and not guess
            and not _render(_condition(task.when), here, f"{where}: when")
        ):
            continue
        raw = _render(task.args, here, where)
        if op.renders_template:
            src = raw.get("src")
            if not isinstance(src, str):
                raise RoleError(f"{task.position}: template needs `src:` (a file in templates/)")
            raw["content"] = _template(role, src, here, task)
        try:
            args = op.parse(raw)
        except ValidationError as exc:
            raise RoleError(f"{task.position}: {task.op}: {_problems(exc)}") from None
        title = _render(task.name, here, f"{where}: name")
        yield Planned(role, task, op, args, here, str(title))


# Roles render in a sandbox (gpunode.roles.render): what it refuses is named as such.
_SANDBOX = "roles render in a Jinja sandbox, without Python internals or the controller"


def _why(exc: Exception, ctx: dict[str, Any]) -> str:
    from jinja2.exceptions import SecurityError, UndefinedError

    if isinstance(exc, (SecurityError, OverflowError)):
        return f"refused: {exc} ({_SANDBOX})"
    name = re.match(r"'(\w+)' is undefined", str(exc)) if isinstance(exc, UndefinedError) else None
    if name and name.group(1) in ctx.get("vars", {}):
        return f"{exc}: the inventory's stack.vars are read as vars.{name.group(1)}"
    return str(exc)


class UnknownValue(RoleError):
    """A value the role names is undefined: before the facts, one only they may give."""


def _render(value: Any, ctx: dict[str, Any], where: str) -> Any:
    import jinja2

    try:
        return render(value, ctx)
    except jinja2.UndefinedError as exc:
        raise UnknownValue(f"{where}: {_why(exc, ctx)}") from None
    except (jinja2.TemplateError, OverflowError) as exc:
        raise RoleError(f"{where}: {_why(exc, ctx)}") from None
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as exc:
        raise RoleError(f"{where}: {type(exc).__name__}: {exc}") from None


def _template(role: Role, src: str, ctx: dict[str, Any], task: Task) -> str:
    import jinja2

    where = f"{task.position} (task {task.name!r}): template {src!r}"
    try:
        return render_template(role.templates, src, ctx)
    except jinja2.TemplateNotFound:
        raise RoleError(f"{where} not found in {role.templates}") from None
    except (jinja2.TemplateError, OverflowError) as exc:
        raise RoleError(f"{role.templates / src} ({where}): {_why(exc, ctx)}") from None
