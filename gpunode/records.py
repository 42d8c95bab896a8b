"""Run records: one JSON file per run under the user's state directory.

GPUNODE_STATE_DIR overrides platformdirs' user_state_dir("gpunode"). A record is
written when the run starts (status "running") and rewritten when it ends, so a
run whose controller was killed still leaves a trace. No secrets go in.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any


def state_dir() -> Path:
    env = os.environ.get("GPUNODE_STATE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_state_dir

    return Path(user_state_dir("gpunode"))


def runs_dir() -> Path:
    return state_dir() / "runs"


class Record:
    def __init__(self, command: str, inventory: str, options: dict[str, Any]) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime())
        self.id = f"{stamp}-{secrets.token_hex(3)}"
        self.path = runs_dir() / f"{self.id}.json"
        self.data: dict[str, Any] = {
            "id": self.id,
            "command": command,
            "inventory": str(Path(inventory).resolve()),
            "options": options,
            "started": time.time(),
            "finished": None,
            "status": "running",
            "exit_code": None,
            "hosts": {},
        }

    def save(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)
        return self.path

    def finish(self, hosts: dict[str, Any], exit_code: int, seconds: float) -> Path:
        self.data.update(
            finished=time.time(),
            status="finished",
            exit_code=exit_code,
            seconds=seconds,
            hosts=hosts,
        )
        return self.save()


def list_runs() -> list[Path]:
    d = runs_dir()
    return sorted(d.glob("*.json")) if d.is_dir() else []


def find_run(name: str | None) -> Path | None:
    runs = list_runs()
    if not runs:
        return None
    if name is None:
        return runs[-1]
    p = Path(name)
    if p.is_file():
        return p
    matches = [r for r in runs if r.stem == name or r.stem.startswith(name)]
    return matches[-1] if matches else None


def load_run(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
