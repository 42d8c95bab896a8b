"""The reference pages under docs/ that are generated from the code: one per command
(docs/commands/) and the inventory's (docs/inventory.md).

    python -m gpunode.reference docs      # write them; a test fails while they are stale
"""

from __future__ import annotations

COMMAND = "python -m gpunode.reference docs"


def pages() -> dict[str, str]:
    """Path under docs/ -> its text."""
    from gpunode.reference import commands, inventory

    out = {f"commands/{name}": text for name, text in commands.pages(COMMAND).items()}
    out["inventory.md"] = inventory.markdown(COMMAND)
    return out
