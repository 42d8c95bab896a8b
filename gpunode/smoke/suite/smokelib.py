"""What every smoke test shares on the host: one JSON line per result.

Runs on the host with the standard library alone (Python 3.8 or later), next
to the test scripts that import it; nothing from gpunode is there.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

STATUSES = ("pass", "warn", "fail", "skip")
NO_GPU = "no NVIDIA GPU visible"
# NVLink multicast (NVLS) stays off in every test process: on shared hosts a program that
# uses it can take the GPUs out of service.
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def env_label() -> str:
    """Which environment the test runs in, as the driver named it."""
    return os.environ.get("GPUNODE_SMOKE_ENV") or sys.executable


def result(
    name: str,
    status: str,
    reason: str = "",
    *,
    value: float | None = None,
    expected: float | None = None,
    unit: str = "",
    seconds: float = 0.0,
    details: dict[str, Any] | None = None,
    env: str | None = None,
) -> dict[str, Any]:
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {STATUSES}")
    return {
        "name": name,
        "status": status,
        "reason": reason,
        "value": value,
        "expected": expected,
        "unit": unit,
        "seconds": round(seconds, 4),
        "env": env if env is not None else env_label(),
        "details": details or {},
    }


def emit(name: str, status: str, reason: str = "", **kw: Any) -> dict[str, Any]:
    line = result(name, status, reason, **kw)
    sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
    sys.stdout.flush()
    return line


def gpu_device_present() -> bool:
    """The driver's device nodes exist (the kernel module is loaded and a GPU bound)."""
    return os.path.exists("/dev/nvidiactl") and any(
        n.startswith("nvidia") and n[6:].isdigit() for n in os.listdir("/dev")
    )


class Timer:
    def __init__(self) -> None:
        self.start = time.monotonic()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.start
