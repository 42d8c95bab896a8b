"""docs/operations.md is generated from the operations; each one documents itself fully."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gpunode.roles.loader import TASK_KEYS
from gpunode.roles.ops import OPERATIONS, Operation
from gpunode.roles.ops.reference import COMMAND, markdown, split_doc

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_docs_operations_md_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), (
        f"docs/operations.md is stale: regenerate it with `{COMMAND}`"
    )


@pytest.mark.parametrize("op", OPERATIONS.values(), ids=list(OPERATIONS))
def test_every_argument_is_described(op: Operation) -> None:
    models = [op.args_model]
    undescribed = []
    while models:
        model = models.pop()
        for name, info in model.model_fields.items():
            if not (info.description or "").strip():
                undescribed.append(f"{model.__name__}.{name}")
            models += [
                t
                for t in getattr(info.annotation, "__args__", (info.annotation,))
                if isinstance(t, type) and hasattr(t, "model_fields")
            ]
    assert not undescribed


@pytest.mark.parametrize("op", OPERATIONS.values(), ids=list(OPERATIONS))
def test_the_example_is_a_task_of_this_operation_whose_arguments_parse(op: Operation) -> None:
    text, example = split_doc(op)
    assert text
    [task] = YAML(typ="safe").load(example)
    assert task["op"] == op.name
    op.parse({k: v for k, v in task.items() if k not in TASK_KEYS})
