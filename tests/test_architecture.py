"""The import graph of gpunode: no module imports itself back, and every import runs down.

Every import counts, whether at the top of a file, inside a function or under
`TYPE_CHECKING`: each one ties the two modules together for the reader. The simulated
lab is a sibling package (`gpunode_lab`), kept apart by tests/test_lab_apart.py.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# The layers, lowest first: a module may import only from its own unit (a subpackage of
# gpunode or a top-level module) or from a unit of a lower layer. Units of one layer do
# not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "gpunode",
        "versions",
        "smiquery",
        "changes",
        "events",
        "records",
        "exitcodes",
        "memo",
        "diskmemo",
        "safetext",
        "components",
    ),
    ("inventory",),
    ("compat", "transport", "repoindex"),
    ("hostpool", "scheduler"),
    ("facts", "monitor", "smoke", "cost"),
    ("resolve", "doctor"),
    ("roles",),
    ("plan",),
    ("execute",),
    ("rollout", "mirror"),
    ("views", "tui"),
    ("cli",),
    ("reference",),
    ("__main__",),
)


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    where: str
    """file:line of the import statement."""

    def __str__(self) -> str:
        return f"{self.where}: {self.source} imports {self.target}"


def _modules(root: Path = REPO) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in (root / "gpunode").rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(modules: dict[str, Path], root: Path = REPO) -> list[Import]:
    out: list[Import] = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(node, package, modules):
                    if target != name:
                        where = f"{path.relative_to(root)}:{node.lineno}"
                        out.append(Import(name, target, where))
    return out


def _targets(
    node: ast.Import | ast.ImportFrom, package: str, modules: dict[str, Path]
) -> list[str]:
    """The modules of gpunode that an import statement names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the package, `level - 1` packages up
            up = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*up, *([node.module] if node.module else [])])
        # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    out: list[str] = []
    for name in names:
        # a name inside a module resolves to that module
        while name not in modules and "." in name:
            name = name.rpartition(".")[0]
        if name in modules and name not in out:
            out.append(name)
    return out


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


@pytest.fixture(scope="module")
def graph() -> list[Import]:
    return _imports(_modules())


def test_every_unit_has_a_layer() -> None:
    units = {_unit(m) for m in _modules()}
    placed = {u for layer in LAYERS for u in layer}
    assert units - placed == set(), "place these in LAYERS"
    assert placed - units == set(), "LAYERS names units that do not exist"


def test_no_import_runs_up_or_sideways(graph: list[Import]) -> None:
    level = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    wrong = [
        f"{imp} ({_unit(imp.source)} is in layer {level[_unit(imp.source)]}, "
        f"{_unit(imp.target)} in layer {level[_unit(imp.target)]})"
        for imp in graph
        if _unit(imp.source) != _unit(imp.target)
        and level[_unit(imp.target)] >= level[_unit(imp.source)]
    ]
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_no_import_cycle(graph: list[Import]) -> None:
    edges: dict[str, list[Import]] = {}
    for imp in graph:
        edges.setdefault(imp.source, []).append(imp)
    cycles = _cycles(edges)
    assert not cycles, "import cycles:\n" + "\n\n".join(
        "\n".join(str(imp) for imp in c) for c in cycles
    )


def _cycles(edges: dict[str, list[Import]]) -> list[list[Import]]:
    """For each group of modules that import each other round, one loop of imports."""
    found: list[list[Import]] = []
    seen: set[str] = set()
    for start in sorted(edges):
        loop = None if start in seen else _loop_from(start, edges)
        if loop:
            seen.update(i.source for i in loop)
            found.append(loop)
    return found


def _loop_from(start: str, edges: dict[str, list[Import]]) -> list[Import] | None:
    """The shortest chain of imports from `start` back to it, or None."""
    reached_by: dict[str, Import] = {}
    queue = deque([start])
    while queue:
        for imp in edges.get(queue.popleft(), []):
            if imp.target == start:
                chain = [imp]
                while chain[0].source != start:
                    chain.insert(0, reached_by[chain[0].source])
                return chain
            if imp.target not in reached_by:
                reached_by[imp.target] = imp
                queue.append(imp.target)
    return None


def test_the_checks_see_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The graph reader finds imports in functions and under TYPE_CHECKING."""
    pkg = tmp_path / "gpunode"
    (pkg / "plan").mkdir(parents=True)
    (pkg / "roles").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "plan" / "__init__.py").write_text("from gpunode.roles import ops\n")
    (pkg / "roles" / "__init__.py").write_text("")
    (pkg / "roles" / "ops.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpunode.plan import x\n"
    )
    imports = _imports(_modules(tmp_path), tmp_path)
    assert {(i.source, i.target, i.where) for i in imports} == {
        ("gpunode.plan", "gpunode.roles.ops", "gpunode/plan/__init__.py:1"),
        ("gpunode.roles.ops", "gpunode.plan", "gpunode/roles/ops.py:3"),
    }
    edges: dict[str, list[Import]] = {}
    for imp in imports:
        edges.setdefault(imp.source, []).append(imp)
    assert [[i.target for i in c] for c in _cycles(edges)] == [
        ["gpunode.roles.ops", "gpunode.plan"]
    ]
