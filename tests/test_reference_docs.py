"""docs/commands/*.md and docs/inventory.md are generated from the code and kept current."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpunode.cli import COMMANDS, cli
from gpunode.exitcodes import table
from gpunode.inventory.model import Document
from gpunode.reference import COMMAND, pages
from gpunode.reference.commands import EXAMPLES
from gpunode.reference.inventory import _models

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = pages()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_generated_page_is_current(name: str) -> None:
    path = DOCS / name
    assert path.exists() and path.read_text(encoding="utf-8") == PAGES[name], (
        f"docs/{name} is stale: regenerate the reference with `{COMMAND}`"
    )


def test_no_page_for_a_command_that_is_gone() -> None:
    written = {f"commands/{p.name}" for p in (DOCS / "commands").glob("*.md")}
    assert written == {n for n in PAGES if n.startswith("commands/")}, (
        f"docs/commands/ has pages the code does not make: regenerate with `{COMMAND}`"
    )


def test_every_command_has_a_page_with_every_option_and_exit_status() -> None:
    for name in COMMANDS:
        text = PAGES[f"commands/{name}.md"]
        assert text.startswith(f"# gpunode {name}\n")
        for code, meaning in table():
            assert f"| {code} | {meaning} |" in text
    apply = PAGES["commands/apply.md"]
    for option in ("--check", "--diff", "--serial", "--max-fail", "--reboot-timeout"):
        assert f"`{option}" in apply or f", {option}" in apply
    assert "| `--reboot-timeout SECONDS` |" in apply and "| `--no-reboot` |" in apply


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_parse_against_their_command(name: str) -> None:
    assert name in COMMANDS
    for line in EXAMPLES[name]:
        words = shlex.split(line.split("|")[-1].split("#")[0].split(">")[0])
        assert words[:2] == ["gpunode", name], line
        # --help after the arguments: click parses them all (an unknown option fails), then
        # prints the help instead of running the command.
        result = CliRunner().invoke(cli, [*words[1:], "--help"])
        assert result.exit_code == 0, (line, result.output)


def test_every_inventory_field_is_described_in_the_reference() -> None:
    text = PAGES["inventory.md"]
    for model in _models(Document):
        assert f"## {model.__name__}\n" in text
        for field, info in model.model_fields.items():
            assert (info.description or "").strip(), f"{model.__name__}.{field} has no docstring"
            assert f"| `{field}` |" in text
