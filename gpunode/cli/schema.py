"""`gpunode schema`: the inventory's JSON Schema, for editor completion."""

from __future__ import annotations

import json

import click


@click.command()
def schema() -> None:
    """Print the JSON Schema of an inventory file. Point your editor's YAML language server
    at it, e.g. `# yaml-language-server: $schema=gpunode-inventory.schema.json`."""
    from gpunode.inventory.model import Document

    doc = Document.model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = "gpunode inventory"
    click.echo(json.dumps(doc, indent=2))
