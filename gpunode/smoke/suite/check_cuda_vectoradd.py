"""cuda-vectoradd: build vectoradd.cu with each installed toolkit's nvcc and run it.

This is what NVIDIA's GPU Operator validator does: a toolkit that compiles but
whose runtime is newer than the driver fails here, not in a user's job.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.smokelib import NO_GPU, Timer, emit, gpu_device_present
else:
    from smokelib import NO_GPU, Timer, emit, gpu_device_present

HERE = os.path.dirname(os.path.abspath(__file__))


def find_toolkits(root: str) -> list[tuple[str, str]]:
    """(version, nvcc) for each <root>/cuda-X.Y/bin/nvcc, oldest first.

    NVIDIA's packages add links (cuda-13 -> cuda-13.0): one toolkit is built with once,
    under its most precise name.
    """
    by_target: dict[str, tuple[str, str]] = {}
    for nvcc in glob.glob(os.path.join(root, "cuda-*", "bin", "nvcc")):
        version = os.path.basename(os.path.dirname(os.path.dirname(nvcc)))[len("cuda-") :]
        if not (re.fullmatch(r"\d+(\.\d+)*", version) and os.access(nvcc, os.X_OK)):
            continue
        target = os.path.realpath(nvcc)
        if target not in by_target or len(version) > len(by_target[target][0]):
            by_target[target] = (version, nvcc)
    found = list(by_target.values())
    if not found:
        # A toolkit installed elsewhere (a runfile into /usr/local/cuda, or distro nvcc).
        nvcc = shutil.which("nvcc") or os.path.join(root, "cuda", "bin", "nvcc")
        if os.access(nvcc, os.X_OK):
            found.append(("default", nvcc))
    return sorted(found, key=lambda vn: [int(p) for p in re.findall(r"\d+", vn[0])])


def nvcc_release(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"release [\d.]+, V([\d.]+)", out.stdout)
    return m.group(1) if m else "unknown"


def tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def check_toolkit(version: str, nvcc: str, work: str, gpu: bool) -> None:
    t = Timer()
    name = f"cuda-vectoradd/{version}"
    release = nvcc_release(nvcc)
    details: dict[str, object] = {"nvcc": nvcc, "release": release}
    exe = os.path.join(work, f"vectoradd-{version}")
    cmd = [nvcc, "-Wno-deprecated-gpu-targets", "-o", exe, os.path.join(HERE, "vectoradd.cu")]
    try:
        built = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        emit(name, "fail", "nvcc did not finish within 180 s", seconds=t.seconds, details=details)
        return
    details["compile_seconds"] = round(t.seconds, 2)
    if built.returncode != 0:
        emit(
            name,
            "fail",
            f"nvcc {release} could not build vectoradd.cu: {tail(built.stderr + built.stdout)}",
            seconds=t.seconds,
            details=details,
        )
        return
    if not gpu:
        emit(
            name,
            "skip",
            f"built with nvcc {release}; not run: {NO_GPU} (/dev/nvidiactl missing)",
            seconds=t.seconds,
            details=details,
        )
        return
    try:
        ran = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        emit(
            name, "fail", "vectoradd did not finish within 60 s", seconds=t.seconds, details=details
        )
        return
    details["output"] = ran.stdout.strip()
    if ran.returncode == 0 and "Test PASSED" in ran.stdout:
        emit(
            name,
            "pass",
            f"built with nvcc {release}, ran, results verified",
            seconds=t.seconds,
            details=details,
        )
    else:
        emit(
            name,
            "fail",
            f"vectoradd built by nvcc {release} failed (exit {ran.returncode}): "
            f"{tail(ran.stderr + ran.stdout)}",
            seconds=t.seconds,
            details=details,
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/usr/local", help="where cuda-X.Y toolkits live")
    args = ap.parse_args()
    toolkits = find_toolkits(args.root)
    if not toolkits:
        emit(
            "cuda-vectoradd",
            "skip",
            f"no CUDA toolkit: no {args.root}/cuda-*/bin/nvcc and no nvcc on PATH",
        )
        return 0
    gpu = gpu_device_present()
    with tempfile.TemporaryDirectory(prefix="vectoradd-") as work:
        for version, nvcc in toolkits:
            check_toolkit(version, nvcc, work, gpu)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
