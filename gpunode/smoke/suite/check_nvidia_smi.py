"""nvidia-smi: every expected GPU is listed, and the loaded kernel module is the installed driver;
on NVSwitch systems every GPU is in the fabric and CUDA initialises (fabric.py).

A module older than the user-space driver is what a driver upgrade without a
reboot leaves behind: nvidia-smi then fails or reports a mismatch, and CUDA
programs fail with "driver/library version mismatch".
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.fabric import check as check_fabric
    from gpunode.smoke.suite.smokelib import Timer, emit, gpu_device_present
else:
    from fabric import check as check_fabric
    from smokelib import Timer, emit, gpu_device_present

FIELDS = ("index", "name", "driver_version", "uuid", "pci.bus_id", "memory.total")
MODULE_VERSION = "/sys/module/nvidia/version"


def parse_query(text: str) -> list[dict[str, str]]:
    gpus = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(FIELDS):
            gpus.append({f: cells[i] for i, f in enumerate(FIELDS)})
    return gpus


def module_version(path: str = MODULE_VERSION) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=None, help="GPUs the inventory declares")
    ap.add_argument("--smi", default=None, help="nvidia-smi to run (default: from PATH)")
    ap.add_argument("--module-version-file", default=MODULE_VERSION)
    args = ap.parse_args()
    t = Timer()
    expect_gpus = bool(args.count)
    smi = args.smi or shutil.which("nvidia-smi")
    if smi is None:
        reason = "nvidia-smi not found: the NVIDIA driver's user-space tools are not installed"
        emit(
            "nvidia-smi",
            "fail" if expect_gpus else "skip",
            reason,
            expected=args.count,
            unit="GPUs",
            seconds=t.seconds,
        )
        return 0
    cmd = [smi, "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        emit("nvidia-smi", "fail", "nvidia-smi did not answer within 60 s", seconds=t.seconds)
        return 0
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        reason = f"nvidia-smi exited {proc.returncode}: {said[0] if said else 'no output'}"
        status = "fail" if expect_gpus or gpu_device_present() else "skip"
        emit("nvidia-smi", status, reason, expected=args.count, unit="GPUs", seconds=t.seconds)
        return 0

    gpus = parse_query(proc.stdout)
    details: dict[str, Any] = {"gpus": gpus}
    n = len(gpus)
    if args.count is not None and n < args.count:
        status, reason = "fail", f"{n} GPUs listed, the inventory expects {args.count}"
    elif args.count is not None and n > args.count:
        status, reason = "warn", f"{n} GPUs listed, more than the {args.count} expected"
    elif n == 0:
        status, reason = "fail", "nvidia-smi lists no GPU"
    else:
        status, reason = "pass", ", ".join(sorted({g["name"] for g in gpus}))
    emit(
        "nvidia-smi/gpus",
        status,
        reason,
        value=n,
        expected=args.count,
        unit="GPUs",
        seconds=t.seconds,
        details=details,
    )

    userspace = gpus[0]["driver_version"] if gpus else None
    loaded = module_version(args.module_version_file)
    if loaded is None:
        status = "fail"
        reason = f"the nvidia kernel module is not loaded ({args.module_version_file} missing)"
    elif userspace is None:
        status, reason = "fail", "nvidia-smi reported no driver version"
    elif loaded != userspace:
        status = "fail"
        reason = (
            f"kernel module {loaded} is loaded but the installed driver is {userspace}: "
            "reboot to load the installed driver"
        )
    else:
        status, reason = "pass", f"kernel module and driver are both {loaded}"
    emit("nvidia-smi/driver", status, reason, value=loaded, expected=userspace, seconds=t.seconds)
    check_fabric(smi)  # NVSwitch systems: the fabric and CUDA's initialisation
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
