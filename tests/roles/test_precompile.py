"""A host's roles compile while its facts are read (roles.walk.precompile): the plan after
them renders what was compiled, and compiles nothing, with the same plan; a role that
does not compile is still refused by the plan, at its place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest

from gpunode.roles import render, walk
from gpunode.roles.walk import precompile
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host


def fresh_caches() -> None:
    for memo in (render._expression, render._template):
        memo.cache_clear()
    render._RENDERED.clear()
    walk._PRECOMPILED.clear()


def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each source Jinja compiles from now on (a template file Jinja keeps is not one)."""
    seen: list[str] = []
    real = jinja2.Environment.compile

    def counted(self: jinja2.Environment, source: Any, *a: Any, **k: Any) -> Any:
        seen.append(str(source)[:60])
        return real(self, source, *a, **k)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    return seen


def test_after_precompile_the_plan_compiles_nothing_and_is_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host, facts = host_from(STACK), fresh_facts()
    fresh_caches()
    cold = plan_host(host, facts)
    fresh_caches()
    seen = compiles(monkeypatch)
    precompile(host, None)
    compiled = len(seen)
    assert compiled > 20  # the stack's roles: their expressions, templates and files
    warm = plan_host(host, facts)
    assert seen[compiled:] == []
    assert warm.to_json() == cold.to_json() and warm.changes


def test_a_role_that_does_not_compile_is_refused_by_the_plan_at_its_place(
    tmp_path: Path,
) -> None:
    role = tmp_path / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(
        '- name: broken\n  op: command\n  cmd: "echo {{ vars.x | }}"\n'
    )
    text = STACK.replace("    cuda_env: true\n", "    cuda_env: true\n    roles: [site]\n")
    host = host_from(text)
    search = (tmp_path / "roles",)
    precompile(host, search)  # says nothing
    plan = plan_host(host, fresh_facts(), search=search)
    assert plan.refused and "tasks.yaml" in plan.refused


def test_hosts_starting_together_compile_each_role_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fifty hosts precompile at the same moment: one thread takes each role, the others
    pass it by (each value's memo waits for the one compile, but every thread walked every
    role's values to ask it)."""
    import threading

    host = host_from(STACK)
    looked: list[object] = []
    real = walk.precompile_value

    def counted(value: object) -> None:
        looked.append(value)
        real(value)

    monkeypatch.setattr(walk, "precompile_value", counted)
    fresh_caches()
    precompile(host, None)
    alone = len(looked)
    assert alone > 20
    fresh_caches()
    looked.clear()
    start = threading.Barrier(8)

    def one() -> None:
        start.wait()
        precompile(host, None)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(looked) == alone
    assert plan_host(host, fresh_facts()).changes  # and the plan after them is whole
