"""gpunode refuses to speak SSH through a paramiko older than the Terrapin fix (3.4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_an_old_paramiko_is_refused_with_the_reason(tmp_path: Path) -> None:
    # a paramiko 3.3.1 distribution found first on the path (its metadata is what is read)
    dist = tmp_path / "site" / "paramiko-3.3.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: paramiko\nVersion: 3.3.1\n")
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  old: {address: 127.0.0.1, ssh: {port: 9}}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run([sys.executable, "-m", "gpunode", "facts", str(inv)],
                         capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert out.returncode != 0, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert "paramiko 3.3.1 is older than 3.4, which fixed the Terrapin attack" in text
    assert "Traceback" not in text
    # with the real one, the same host is simply unreachable (nothing listens on port 9)
    real = subprocess.run([sys.executable, "-m", "gpunode", "facts", str(inv)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert real.returncode == 3 and "paramiko" not in real.stdout + real.stderr
