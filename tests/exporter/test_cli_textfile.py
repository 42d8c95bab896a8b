"""`gpunode exporter --textfile DIR --once` on `connection: local` hosts whose nvidia-smi is
the H200-shaped stand-in first on PATH: the real CLI, sampler and writer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

FAKE_DIR = Path(__file__).parent.parent / "fixtures" / "monitor"


def run(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    inv = tmp / "inv.yaml"
    inv.write_text("defaults: {connection: local, become: none}\nhosts:\n  a: {}\n  b: {}\n")
    env = {**os.environ, "PATH": f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}",
           "FAKE_SMI_GPUS": "3", "GPUNODE_STATE_DIR": str(tmp / "state"), **extra}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "gpunode", "exporter", str(inv), *args],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip


def test_textfile_once_writes_every_gpu_and_exits(tmp_path: Path) -> None:
    out = run(tmp_path, "--textfile", str(tmp_path), "--once", "--interval", "1")
    assert out.returncode == 0, out.stderr
    fams = {
        f.name: f for f in text_string_to_metric_families((tmp_path / "gpunode.prom").read_text())
    }
    temps = fams["DCGM_FI_DEV_GPU_TEMP"].samples
    assert sorted((s.labels["Hostname"], s.labels["gpu"]) for s in temps) == [
        (h, str(g)) for h in "ab" for g in range(3)
    ]
    assert {s.value for s in fams["gpunode_host_up"].samples} == {1.0}


def test_textfile_once_says_unreachable_when_no_gpu_answers(tmp_path: Path) -> None:
    down = tmp_path / "down"
    down.touch()
    out = run(tmp_path, "--textfile", str(tmp_path), "--once", "--interval", "1", "--names",
              "simple", FAKE_SMI_DOWN=str(down))  # fmt: skip
    assert out.returncode == 3, out.stderr
    text = (tmp_path / "gpunode.prom").read_text()
    up = {s.labels["Hostname"]: (s.value, s.labels["inventory"])
          for f in text_string_to_metric_families(text) for s in f.samples
          if s.name == "gpunode_host_up"}  # fmt: skip
    inventory = str((tmp_path / "inv.yaml").resolve())  # no `name:`: its path names it
    assert up == {"a": (0.0, inventory), "b": (0.0, inventory)}
    assert "# TYPE gpu_temperature gauge" in text and "gpu_temperature{" not in text


def test_once_needs_textfile(tmp_path: Path) -> None:
    out = run(tmp_path, "--once")
    assert out.returncode == 5 and "--once needs --textfile" in out.stderr
    out = run(tmp_path, "--listen", "nowhere")
    assert out.returncode == 5 and "ADDR:PORT" in out.stderr
