"""What a lab host has written: its disk's upper layer, file by file, for comparing a host
with another (tests, bench/killsoak.py) without trusting anything gpunode reports."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def written(upper: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Each file under `upper` (relative path) -> its mode and sha256, a link's target, or
    a special file's mode; paths starting with one of `skip` left out."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(upper):
        rel_dir = os.path.relpath(dirpath, upper)
        for name in filenames + [d for d in dirnames if os.path.islink(f"{dirpath}/{d}")]:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel.startswith(skip):
                continue
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if os.path.islink(full):
                out[rel] = "-> " + os.readlink(full)
            elif os.path.isfile(full):
                with open(full, "rb") as fh:
                    out[rel] = f"{st.st_mode:o} " + hashlib.sha256(fh.read()).hexdigest()
            else:
                out[rel] = f"special {st.st_mode:o}"
    return out
