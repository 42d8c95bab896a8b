"""Task arguments through Jinja2: what keeps its type and what stays text."""

from __future__ import annotations

from gpunode.roles.render import render


def test_one_expression_keeps_its_type() -> None:
    ctx = {"names": ["libnccl2", "libnccl-dev"], "n": 3}
    assert render("{{ names }}", ctx) == ["libnccl2", "libnccl-dev"]
    assert render("{{ n }}", ctx) == 3
    assert render({"a": ["{{ n }}", "x"]}, ctx) == {"a": [3, "x"]}


def test_text_around_an_expression_is_kept_newlines_included() -> None:
    ctx = {"contact": "gpu-admins@example.org"}
    assert render("{{ contact }}\n", ctx) == "gpu-admins@example.org\n"
    assert render("to: {{ contact }}\n\n", ctx) == "to: gpu-admins@example.org\n\n"
    assert render(" {{ contact }}", ctx) == " gpu-admins@example.org"
