"""The `dcgm` smoke test (gpunode/smoke/suite/check_dcgm.py) reads dcgmi's tables as DCGM 4
prints them (dcgmi/Query.cpp, dcgmi/Diag.cpp of github.com/NVIDIA/DCGM): run here against a
`dcgmi` on PATH that prints those outputs, graded per test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SUITE = Path(__file__).resolve().parents[2] / "gpunode" / "smoke" / "suite"
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"


def check(tmp_path: Path, diag: str, *args: str, engine: bool = True) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    said = (
        f'case "$1" in discovery) cat {FIX / "discovery-l.txt"} ;; diag) cat {FIX / diag} ;; esac'
        if engine
        else 'echo "Error: Unable to connect to host engine. Host engine connection'
        ' invalid/disconnected."; exit 255'
    )
    (bin_dir / "dcgmi").write_text(f"#!/bin/sh\n{said}\n")
    (bin_dir / "dcgmi").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    out = subprocess.run(
        [sys.executable, str(SUITE / "check_dcgm.py"), *args],
        cwd=SUITE, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return {r["name"]: r for r in map(json.loads, out.stdout.splitlines())}


def test_a_failed_software_test_fails_naming_dcgms_warning(tmp_path: Path) -> None:
    got = check(tmp_path, "diag-r1-fail.txt", "--count", "2")
    assert got["dcgm/discovery"]["status"] == "pass"
    assert got["dcgm/discovery"]["value"] == 2
    assert got["dcgm/discovery"]["details"]["names"] == ["NVIDIA H200", "NVIDIA H200"]
    software = got["dcgm/diag/software"]
    assert software["status"] == "fail"
    assert "persistence mode for GPU 1 is disabled" in software["reason"]
    assert software["details"]["entities"] == {"GPU0": "Pass", "GPU1": "Fail"}


def test_a_passing_diag_passes_and_fewer_gpus_than_declared_fail(tmp_path: Path) -> None:
    got = check(tmp_path / "a", "diag-r1-pass.txt")
    assert got["dcgm/diag/software"]["status"] == "pass", got
    assert got["dcgm/diag/software"]["details"]["entities"] == {"GPU0": "Pass", "GPU1": "Pass"}
    fewer = check(tmp_path / "b", "diag-r1-pass.txt", "--count", "8")
    assert fewer["dcgm/discovery"]["status"] == "fail"
    assert "dcgm/diag/software" not in fewer  # the diagnostic runs after a sound discovery


def test_no_host_engine_fails(tmp_path: Path) -> None:
    got = check(tmp_path, "diag-r1-pass.txt", engine=False)
    assert got["dcgm/discovery"]["status"] == "fail"
    assert "Unable to connect to host engine" in got["dcgm/discovery"]["reason"]
