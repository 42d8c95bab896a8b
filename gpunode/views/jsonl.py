"""`--json` of `apply`: one `apply-event` envelope per event, each on its own line; the
last line is the `recap` (docs/json.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from gpunode.events import Event
from gpunode.views.envelope import dumps


class JsonLines:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, e: Event) -> None:
        self.write(e.to_json())

    def write(self, obj: Mapping[str, Any]) -> None:
        """`obj` (with its "event" word) as one `apply-event` line."""
        self.out.write(dumps("apply-event", obj) + "\n")
        self.out.flush()
