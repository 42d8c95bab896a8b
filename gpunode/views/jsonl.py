"""`--json`: one JSON object per event, then a recap object."""

from __future__ import annotations

import json
from typing import Any, TextIO

from gpunode.events import Event


class JsonLines:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, e: Event) -> None:
        self.write(e.to_json())

    def write(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, sort_keys=False, default=str) + "\n")
        self.out.flush()
