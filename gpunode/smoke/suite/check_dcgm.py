"""dcgm: DCGM's host engine sees every GPU, and its quickest diagnostic passes.

`dcgmi discovery -l` must list as many GPUs as the inventory declares (else as nvidia-smi
lists); `dcgmi diag -r 1` (the software deployment checks, seconds long) is graded per
test from its table: one result per test it ran (`dcgm/diag/<test>`), failed when DCGM
says Fail (or Warn), with its warning lines as the reason. The output formats are DCGM 4's
(dcgmi/Query.cpp and dcgmi/Diag.cpp of github.com/NVIDIA/DCGM).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.smokelib import Timer, emit
else:
    from smokelib import Timer, emit

FOUND = re.compile(r"^(\d+) GPUs? found\b")
GPU_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*Name:\s*(.*?)\s*\|$")
ROW = re.compile(r"^\|\s*(.*?)\s*\|\s*(.*?)\s*\|$")
SECTION = re.compile(r"^[|+]-----\s+(\w+)\s+-+[|+]")
ENTITY = re.compile(r"^([A-Za-z]+\d+): (Pass|Skip|Warn|Fail|Not Run)$")
VERDICTS = {"Pass": "pass", "Skip": "skip", "Warn": "fail", "Fail": "fail"}


def run(argv: list[str], timeout: float = 240.0) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(argv)} did not finish within {timeout:g} s"
    return p.returncode, (p.stdout + p.stderr).strip()


def discovered(text: str) -> tuple[int | None, list[str]]:
    """`N GPUs found (Active).` and each GPU's name from the table."""
    count = next((int(m.group(1)) for m in map(FOUND.match, text.splitlines()) if m), None)
    names = [m.group(2) for m in map(GPU_ROW.match, text.splitlines()) if m]
    return count, names


class DiagTest:
    """One test of `dcgmi diag`'s table: DCGM's verdict, each entity's, its warnings."""

    def __init__(self, name: str, category: str, verdict: str) -> None:
        self.name, self.category, self.verdict = name, category, verdict
        self.entities: dict[str, str] = {}
        self.warnings: list[str] = []


def diag_tests(text: str) -> list[DiagTest]:
    """Each test of `dcgmi diag`'s table past its Metadata section, in order."""
    tests: list[DiagTest] = []
    section = ""
    for line in text.splitlines():
        m = SECTION.match(line)
        if m:
            section = m.group(1)
            continue
        row = ROW.match(line)
        if not row or section in ("", "Metadata"):
            continue
        name, value = row.groups()
        if name and value in VERDICTS:
            tests.append(DiagTest(name, section, value))
        elif not tests or not value:
            continue
        elif name.startswith("Warning"):  # "Warning" or "Warning: GPU0", wrapped at 46
            tests[-1].warnings.append(value)
        elif not name and (e := ENTITY.match(value)):
            tests[-1].entities[e.group(1)] = e.group(2)
        elif not name and tests[-1].warnings:
            tests[-1].warnings[-1] += value
    return tests


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=None, help="GPUs the inventory declares")
    args = ap.parse_args()
    t = Timer()
    if not shutil.which("dcgmi"):
        reason = "dcgmi not found: DCGM (datacenter-gpu-manager-4) is not installed"
        emit("dcgm", "fail", reason, seconds=t.seconds)
        return 0
    code, out = run(["dcgmi", "discovery", "-l"], timeout=60)
    count, names = discovered(out) if code == 0 else (None, [])
    want = args.count
    if code != 0 or count is None:
        last = out.splitlines()[-1] if out else f"exit {code}"
        status, reason = "fail", f"dcgmi discovery -l: {last[-300:]}"
    elif count == 0 or (want is not None and count < want):
        status, reason = "fail", f"DCGM sees {count} GPUs of {want if want is not None else 'any'}"
    else:
        status, reason = "pass", f"DCGM sees {count} GPUs ({', '.join(sorted(set(names)))})"
    emit("dcgm/discovery", status, reason, value=count, expected=want, unit="GPUs",
         seconds=t.seconds, details={"names": names})  # fmt: skip
    if status != "pass":
        return 0
    t = Timer()
    code, out = run(["dcgmi", "diag", "-r", "1"])
    tests = diag_tests(out)
    if not tests:
        last = out.splitlines()[-1] if out else f"exit {code}"
        emit("dcgm/diag", "fail", f"dcgmi diag -r 1 (exit {code}): {last[-300:]}",
             seconds=t.seconds)  # fmt: skip
        return 0
    for test in tests:
        said = f": {' '.join(test.warnings)[:300]}" if test.warnings else ""
        reason = f"{test.category}: {test.verdict}{said}"
        details = {"entities": test.entities, "run_level": 1}
        emit(f"dcgm/diag/{test.name}", VERDICTS[test.verdict], reason, seconds=t.seconds,
             details=details)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
