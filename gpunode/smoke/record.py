"""A `gpunode smoke` run's record, beside apply's: what `gpunode cost` reads its figures from."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpunode.records import InventoryId, Record
from gpunode.smoke.runner import HostSmoke


def record_smoke(
    inventory: str | InventoryId,
    options: dict[str, Any],
    results: Sequence[HostSmoke],
    statuses: dict[str, str],
    exit_code: int,
    seconds: float,
) -> Path:
    rec = Record("smoke", inventory, options)
    hosts = {r.host: {"status": statuses[r.host], "smoke": r.to_json()} for r in results}
    return rec.finish(hosts, exit_code, seconds)
