"""How the mirror writes what it makes (indexes, pages, manifests): whole or not at all,
world-readable for the web server; and the manifest plan checks a folder's files by
(gpunode-mirror.json: {"files": {name: sha256}}, read by gpunode.repoindex)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from gpunode.repoindex import MIRROR_MANIFEST


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def read_manifest(folder: Path) -> dict[str, str]:
    """An earlier run's manifest of `folder`: {} when there is none or it is unreadable."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        files = json.loads((folder / MIRROR_MANIFEST).read_text())["files"]
        return {str(name): str(sha) for name, sha in files.items()}
    return {}


def write_manifest(folder: Path, files: Mapping[str, str]) -> None:
    """What `folder` holds, for plan's check of a host's needs against the mirror."""
    doc = {"files": dict(sorted(files.items()))}
    write_atomic(folder / MIRROR_MANIFEST, json.dumps(doc, indent=1))
