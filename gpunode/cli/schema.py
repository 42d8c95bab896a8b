"""`gpunode schema`: the JSON Schema of the inventory (for editor completion), or of a
`--json` output (docs/json.md)."""

from __future__ import annotations

import json
import sys

import click

from gpunode.exitcodes import ExitCode
from gpunode.views.envelope import KINDS


@click.command()
@click.option(
    "--output",
    "kind",
    type=click.Choice(KINDS),
    metavar="KIND",
    help=f"The schema of a --json output instead: {', '.join(KINDS)}.",
)
@click.option("--inventory", is_flag=True, help="The inventory file's schema (the default).")
def schema(kind: str | None, inventory: bool) -> None:
    """Print the JSON Schema of an inventory file. Point your editor's YAML language server
    at it, e.g. `# yaml-language-server: $schema=gpunode-inventory.schema.json`.

    With --output KIND, print the schema of that `--json` output (one line of it for
    apply-event and top-sample); docs/schemas/ holds them all.
    """
    from gpunode.views.schemas import schema as schema_of

    if kind is not None and inventory:
        click.echo("error: --output and --inventory ask for different schemas: pick one", err=True)
        sys.exit(ExitCode.USAGE)
    click.echo(json.dumps(schema_of(kind or "inventory"), indent=2))
