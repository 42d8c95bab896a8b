"""The lab stays apart from the product: no module under gpunode/ imports gpunode_lab, the
product's wheel carries none of it, and `gpunode lab` reaches the lab only through the
`gpunode.commands` entry points."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from importlib.metadata import EntryPoint
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import gpunode
from gpunode.cli import cli, plugins
from gpunode.exitcodes import ExitCode

PRODUCT = Path(gpunode.__file__).parent
ROOT = PRODUCT.parent
LAB = "gpunode_lab"


def _names_lab(name: str | None) -> bool:
    return name is not None and (name == LAB or name.startswith(LAB + "."))


def _leading_text(node: ast.expr) -> str:
    """A string argument's text, or an f-string's up to its first placeholder."""
    if isinstance(node, ast.JoinedStr) and node.values:
        node = node.values[0]
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def lab_imports(source: str) -> list[str]:
    """Every place in `source` that imports gpunode_lab: import statements at any depth
    (inside functions too), and calls such as importlib.import_module("gpunode_lab...") or
    __import__ / resources.files / find_spec that name it in a string argument."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _names_lab(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _names_lab(node.module):
            found.append(str(node.module))
        elif isinstance(node, ast.Call):
            args = [*node.args, *(k.value for k in node.keywords)]
            found += [s for s in map(_leading_text, args) if _names_lab(s)]
    return found


def test_the_checker_sees_every_spelling() -> None:
    for bad in (
        "import gpunode_lab",
        "import gpunode_lab.cli as c",
        "from gpunode_lab.cli import lab",
        "from gpunode_lab import cli",
        "def f():\n    from gpunode_lab.repo import smi_sim\n",
        "class C:\n    def m(self):\n        import gpunode_lab\n",
        "importlib.import_module('gpunode_lab.cli')",
        "import_module(name='gpunode_lab')",
        "__import__('gpunode_lab.faults', fromlist=['KNOBS'])",
        "resources.files('gpunode_lab.repo')",
        "importlib.util.find_spec('gpunode_lab')",
        "importlib.import_module(f'gpunode_lab.{name}')",
    ):
        assert lab_imports(bad), bad
    for fine in (
        "from gpunode.cli import plugins",
        "import gpunode_labs",
        "importlib.import_module(f'{pkg}.gpunode_lab')",
        "x = 'pip install -e ./gpunode_lab'",
        '"""Says nothing of gpunode_lab.cli in a call."""',
    ):
        assert not lab_imports(fine), fine


def test_no_product_module_imports_the_lab() -> None:
    modules = sorted(PRODUCT.rglob("*.py"))
    assert PRODUCT / "cli" / "__init__.py" in modules
    offenders = {
        str(p.relative_to(ROOT)): uses
        for p in modules
        if (uses := lab_imports(p.read_text(encoding="utf-8")))
    }
    assert offenders == {}


@pytest.mark.slow
def test_the_product_wheel_holds_no_lab_file(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("gpunode-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpunode/cli/__init__.py" in names
    assert [n for n in names if LAB in n or "gpunode/lab/" in n] == []
    assert {n.split("/")[0] for n in names} == {
        "gpunode",
        wheel.name.split("-py")[0] + ".dist-info",
    }


def test_without_the_lab_gpunode_lab_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plugins, "installed", lambda: {})
    for args in (["lab"], ["lab", "up", "--hosts", "4"], ["lab", "--help"]):
        out = CliRunner().invoke(cli, args)
        assert out.exit_code == ExitCode.USAGE, args
        assert out.output.splitlines() == [
            "gpunode lab is not installed: pip install -e ./gpunode_lab in a gpunode checkout"
            " (scripts/setup.sh does it)"
        ]
    listing = CliRunner().invoke(cli, ["--help"]).output
    assert "(not installed)" in listing


def test_an_installed_command_comes_from_its_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = EntryPoint("hello", "tests.test_lab_apart:hello", plugins.GROUP)
    monkeypatch.setattr(plugins, "installed", lambda: {"hello": ep})
    out = CliRunner().invoke(cli, ["hello", "--name", "h200"])
    assert (out.exit_code, out.output) == (0, "hello h200\n")
    assert "hello" in CliRunner().invoke(cli, ["--help"]).output


def test_the_lab_when_installed_answers_through_the_hook() -> None:
    if "lab" not in plugins.installed():
        pytest.skip("gpunode-lab is not installed (pip install -e ./gpunode_lab)")
    out = subprocess.run(
        [sys.executable, "-m", "gpunode", "lab", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "up" in out.stdout and "fault" in out.stdout


@click.command("hello")
@click.option("--name", required=True)
def hello(name: str) -> None:
    """A command an entry point names, as another distribution would add it."""
    click.echo(f"hello {name}")
