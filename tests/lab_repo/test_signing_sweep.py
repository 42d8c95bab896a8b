"""A killed repository build leaves its private gpg home behind; the next build removes the
homes whose builder is gone and keeps those of builds still running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gpunode_lab.repo.signing import _sweep


def test_homes_of_dead_builders_are_swept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    dead = tmp_path / f"gpunode-lab-gpg-{gone}-abc123"
    alive = tmp_path / f"gpunode-lab-gpg-{os.getpid()}-def456"
    fresh_unnamed = tmp_path / "gpunode-lab-gpg-k2j3h4"
    old_unnamed = tmp_path / "gpunode-lab-gpg-a8b7c6"
    other = tmp_path / "gpunode-keep-me"
    for d in (dead, alive, fresh_unnamed, old_unnamed, other):
        (d / "private-keys-v1.d").mkdir(parents=True)
    hour_ago = time.time() - 3700
    os.utime(old_unnamed, (hour_ago, hour_ago))

    _sweep(tmp_path)

    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [alive.name, fresh_unnamed.name, other.name]
    )
