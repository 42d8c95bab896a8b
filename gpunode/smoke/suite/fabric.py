"""NVSwitch systems: every GPU registered with the fabric, and CUDA initialising.

On an 8-GPU HGX board the GPUs join the NVSwitch fabric only once nvidia-fabricmanager
runs at the loaded module's release; until then nvidia-smi shows each GPU's fabric state
"In Progress" and CUDA fails with 802, "system not yet initialized". Hosts without
NVSwitches have no fabric (nvidia-smi says N/A) and get neither result.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.smokelib import Timer, emit
else:
    from smokelib import Timer, emit

PCI = "/sys/bus/pci/devices"
FABRIC_FIELDS = "pci.bus_id,fabric.state,fabric.status"
# CUresult values (cuda.h): what a missing fabric manager gives, and its neighbours
CUDA_ERRORS = {
    100: "CUDA_ERROR_NO_DEVICE",
    802: "CUDA_ERROR_SYSTEM_NOT_READY: system not yet initialized",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
}
HINT = "is nvidia-fabricmanager running at the loaded driver's release?"


def nvswitch_count(pci: str = PCI) -> int:
    """NVIDIA functions of class 0x0680 (Bridge: the NVSwitches) on the PCI bus."""
    n = 0
    try:
        slots = os.listdir(pci)
    except OSError:
        return 0
    for slot in slots:
        try:
            with (
                open(os.path.join(pci, slot, "vendor")) as v,
                open(os.path.join(pci, slot, "class")) as c,
            ):
                n += v.read().strip() == "0x10de" and c.read().strip().startswith("0x0680")
        except OSError:
            continue
    return n


def parse_fabric(text: str) -> list[tuple[str, str, str]]:
    """`00000000:07:00.0, Completed, Success` lines -> (bus id, state, status)."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and ":" in cells[0]:
            out.append((cells[0], cells[1], cells[2]))
    return out


def check_fabric(smi: str) -> None:
    t = Timer()
    cmd = [smi, f"--query-gpu={FABRIC_FIELDS}", "--format=csv,noheader"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        emit("nvidia-smi/fabric", "fail", "nvidia-smi did not answer within 60 s")
        return
    gpus = parse_fabric(proc.stdout)
    waiting = [g for g in gpus if (g[1], g[2]) != ("Completed", "Success")]
    details = {"gpus": [{"bus_id": b, "state": s, "status": st} for b, s, st in gpus]}
    if proc.returncode != 0 or not gpus:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        status, reason = "fail", f"nvidia-smi could not say: {said[0] if said else 'no output'}"
    elif waiting:
        b, s, st = waiting[0]
        status = "fail"
        reason = f"{len(waiting)} of {len(gpus)} GPUs not in the fabric ({b}: {s}, {st}): {HINT}"
    else:
        status, reason = "pass", f"{len(gpus)} GPUs registered with the NVSwitch fabric"
    emit("nvidia-smi/fabric", status, reason, value=len(gpus) - len(waiting),
         expected=len(gpus), unit="GPUs", seconds=t.seconds, details=details)  # fmt: skip


def check_cuda_init() -> None:
    """cuInit and cuDeviceGetCount through the driver's libcuda, no compiler needed."""
    t = Timer()
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        emit("cuda-init", "skip", f"libcuda.so.1 cannot be loaded: {exc}", seconds=t.seconds)
        return
    rc = cuda.cuInit(0)
    count = ctypes.c_int(0)
    if rc == 0:
        rc = cuda.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        what = CUDA_ERRORS.get(rc, f"CUresult {rc}")
        emit("cuda-init", "fail", f"cuInit failed with {rc} ({what}): {HINT}", seconds=t.seconds)
        return
    emit("cuda-init", "pass", f"CUDA initialised, {count.value} devices", value=count.value,
         unit="GPUs", seconds=t.seconds)  # fmt: skip


def check(smi: str) -> None:
    """Both checks, on hosts with NVSwitches only."""
    if nvswitch_count():
        check_fabric(smi)
        check_cuda_init()
