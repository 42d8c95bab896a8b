"""The smoke suite's fabric checks (gpunode/smoke/suite/fabric.py), run as on a host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpunode.smoke import suite

SUITE = Path(suite.__file__).parent
FIX = Path(__file__).parent.parent / "fixtures" / "facts" / "h200-fabric"


def check_fabric(tmp_path: Path, answer: str) -> dict[str, object]:
    """fabric.check_fabric against an nvidia-smi that prints `answer`."""
    (tmp_path / "answer.txt").write_text(answer)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {tmp_path / 'answer.txt'}\n")
    smi.chmod(0o755)
    code = f"import fabric; fabric.check_fabric({str(smi)!r})"
    out = subprocess.run([sys.executable, "-c", code], cwd=SUITE, capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    (line,) = out.stdout.splitlines()
    result: dict[str, object] = json.loads(line)
    return result


def test_every_gpu_completed_passes(tmp_path: Path) -> None:
    rows = "".join(f"00000000:00:0{6 + i}.0, Completed, Success\n" for i in range(4))
    r = check_fabric(tmp_path, rows)
    assert (r["name"], r["status"], r["value"], r["expected"]) == (
        "nvidia-smi/fabric",
        "pass",
        4,
        4,
    )


def test_a_gpu_still_waiting_fails_naming_it(tmp_path: Path) -> None:
    rows = "00000000:00:06.0, Completed, Success\n00000000:00:07.0, In Progress, N/A\n"
    r = check_fabric(tmp_path, rows)
    assert r["status"] == "fail"
    assert str(r["reason"]).startswith("1 of 2 GPUs not in the fabric (00000000:00:07.0: In")


def test_the_real_no_fabric_answer_fails_where_nvswitches_are(tmp_path: Path) -> None:
    """N/A (the real H200 without NVSwitch) on a board that has NVSwitches: no fabric."""
    r = check_fabric(tmp_path, (FIX / "fabric-query.txt").read_text().replace("rc=0", ""))
    assert r["status"] == "fail" and "N/A, N/A" in str(r["reason"])


def test_nvswitches_counted_from_sysfs(tmp_path: Path) -> None:
    sys.path.insert(0, str(SUITE))
    try:
        import fabric  # the suite's module, as the host imports it
    finally:
        sys.path.remove(str(SUITE))
    for slot, (vendor, cls) in {
        "0000:07:00.0": ("0x10de", "0x068000"),  # an NVSwitch
        "0000:00:06.0": ("0x10de", "0x030200"),  # a GPU
        "0000:00:1f.0": ("0x8086", "0x068000"),  # someone else's bridge
    }.items():
        (tmp_path / slot).mkdir()
        (tmp_path / slot / "vendor").write_text(vendor + "\n")
        (tmp_path / slot / "class").write_text(cls + "\n")
    assert fabric.nvswitch_count(str(tmp_path)) == 1
    assert fabric.nvswitch_count(str(tmp_path / "missing")) == 0
