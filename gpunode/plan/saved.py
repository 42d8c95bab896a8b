"""A saved plan: `gpunode plan --out FILE` keeps what each host would do, and
`gpunode apply FILE` does exactly that or nothing on the host.

The file names the inventory (its path and the sha256 of every file that makes it: the
inventory, group_vars/, host_vars/ and roles/ beside it), the selection and options the
plan was made with, and each host's plan: shown (`HostPlan.to_json`) and as a fingerprint
(`HostPlan.fingerprint`, file contents by hash only). apply reads each host again and
applies it only when its plan is the saved one, to the change; nothing in the file is run
from it. It holds no secret (a file's content appears as its hash) and is written 0600.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode import __version__
from gpunode.changes import HostPlan

FORMAT = 1
MARK = "gpunode-saved-plan"


class SavedPlanError(Exception):
    """The file is not a saved plan this gpunode can apply, or it no longer applies."""


@dataclass
class SavedPlan:
    inventory: str
    digest: str
    limit: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    hosts: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    """Each host's fingerprint; () for a host that could not be read when it was saved."""


def inventory_digest(inventory: str) -> str:
    """sha256 over the files an inventory is made of, by their paths relative to it."""
    path = Path(inventory).resolve()
    h = hashlib.sha256()
    files = [path]
    for sub in ("group_vars", "host_vars", "roles"):
        d = path.parent / sub
        if d.is_dir():
            files += sorted(p for p in d.rglob("*") if p.is_file())
    for f in files:
        h.update(str(f.relative_to(path.parent)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def save(
    out: str,
    inventory: str,
    limit: str | None,
    options: dict[str, Any],
    plans: dict[str, HostPlan | None],
) -> None:
    doc = {
        MARK: FORMAT,
        "gpunode": __version__,
        "inventory": str(Path(inventory).resolve()),
        "digest": inventory_digest(inventory),
        "limit": limit,
        "options": options,
        "hosts": {
            name: {
                "plan": p.to_json() if p is not None else None,
                "fingerprint": [list(k) for k in p.fingerprint()] if p is not None else [],
            }
            for name, p in plans.items()
        },
    }
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")


def is_saved_plan(path: str) -> bool:
    """Whether `path` is a saved plan (JSON with its mark), not an inventory."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
    except OSError:
        return False
    return head.startswith(b"{") and MARK.encode() in head


def load(path: str) -> SavedPlan:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SavedPlanError(f"{path}: not a saved plan ({exc})") from None
    if doc.get(MARK) != FORMAT:
        raise SavedPlanError(f"{path}: a saved plan of another format ({doc.get(MARK)!r})")
    if doc.get("gpunode") != __version__:
        raise SavedPlanError(
            f"{path}: saved by gpunode {doc.get('gpunode')}, this is {__version__}: plan again"
        )
    saved = SavedPlan(
        inventory=str(doc["inventory"]),
        digest=str(doc["digest"]),
        limit=doc.get("limit"),
        options=dict(doc.get("options") or {}),
        hosts={
            str(name): tuple(tuple(str(x) for x in k) for k in h.get("fingerprint") or [])
            for name, h in doc["hosts"].items()
        },
    )
    try:
        now = inventory_digest(saved.inventory)
    except OSError as exc:
        raise SavedPlanError(
            f"{path}: its inventory {saved.inventory} cannot be read: {exc}"
        ) from None
    if now != saved.digest:
        raise SavedPlanError(
            f"{path}: the inventory {saved.inventory} (or its group_vars, host_vars, roles)"
            " changed since this plan was saved: plan again"
        )
    return saved
