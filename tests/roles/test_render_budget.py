"""Which renders run under the trace budget: a short expression that can only do work
linear in its values runs without it (a converged host's plan is mostly such lookups);
anything that loops, calls, repeats or can grow its input stays traced."""

from __future__ import annotations

import sys

import pytest
from jinja2.exceptions import SecurityError

from gpunode.roles import render as r


class Seen:
    """An attribute that records whether the render's trace budget was on when read."""

    def __init__(self) -> None:
        self.budgeted: list[bool] = []

    @property
    def value(self) -> str:
        self.budgeted.append(isinstance(getattr(sys.gettrace(), "__self__", None), r._Budget))
        return "a.b"


@pytest.mark.parametrize(
    "source",
    [
        "{{ s.value }}",
        "{{ s.value if s.value == 'a.b' else 'no' }}",
        "{{ s.value | replace('.', '') | int if false else s.value | upper }}",
        "{{ {'a.b': 1}.get(s.value, 0) }}",
        "cuda-{{ s.value | replace('.', '-') }} ({{ s.value ~ '/' }})",
        "{{ s.value.rstrip('/') }}",
    ],
)
def test_a_linear_render_runs_without_the_budget(source: str) -> None:
    seen = Seen()
    r.render(source, {"s": seen})
    assert seen.budgeted and not any(seen.budgeted)


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(2) %}{{ s.value }}{% endfor %}",
        "{{ [s.value] * 2 }}",
        "{{ s.value | join(s.value) }}",
        "{{ s.value | q | q }}",
        "{{ [s.value] | pin(s.value) }}",
        "{{ s.value | replace('.', '..') }}",
        "{{ s.value.strip(s.value) }}",
        "{{ s.value.ljust(3) }}",
        "{{ s.value | map('upper') | list }}",
        "{{ s.value" + " | lower" * 70 + " }}",
    ],
)
def test_anything_that_can_grow_or_loop_stays_budgeted(source: str) -> None:
    seen = Seen()
    r.render(source, {"s": seen})
    assert seen.budgeted and all(seen.budgeted)


def test_a_budgeted_render_is_still_stopped() -> None:
    with pytest.raises(SecurityError, match="longer than"):
        loops = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
        r.render(loops, {})
