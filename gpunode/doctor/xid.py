"""What the common Xid codes mean and what to do, from NVIDIA's Xid catalog
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and its page on
dynamic page retirement (https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html).

A kernel log line reads `NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the
bus.`: the code follows the device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]

XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)\b")


@dataclass(frozen=True)
class Xid:
    meaning: str
    severity: Severity
    fix: str


RESET = "drain the host, reset the GPU (nvidia-smi -r) or reboot; if it recurs, contact support"
APP = "restart the application; if it recurs with other applications, run the GPU diagnostics"

XIDS: dict[int, Xid] = {
    13: Xid("graphics engine exception", "warning", APP),
    31: Xid("GPU memory page fault (MMU fault)", "warning", APP),
    43: Xid("GPU stopped processing (a channel was reset)", "warning", APP),
    45: Xid("preemptive cleanup after an earlier error", "info", "see the error logged before it"),
    48: Xid("double bit ECC error (DBE)", "error", RESET),
    61: Xid("internal micro-controller breakpoint or warning", "error", RESET),
    62: Xid("internal micro-controller halt", "error", RESET),
    63: Xid(
        "ECC page retirement or row remapping recorded",
        "warning",
        "reset the GPU (nvidia-smi -r) or reboot so that the retirement or remapping takes effect",
    ),
    64: Xid("ECC page retirement or row remapping failed", "error", RESET),
    74: Xid("NVLink error", "error", RESET + "; check the NVLink cabling or board"),
    79: Xid(
        "GPU has fallen off the bus",
        "error",
        "reboot; if it recurs, check the slot, riser, power and cooling, and contact support",
    ),
    92: Xid("high single-bit ECC error rate", "warning", "watch the ECC counters; " + RESET),
    94: Xid("contained ECC error", "warning", APP + "; reset the GPU when it is idle"),
    95: Xid("uncontained ECC error", "error", RESET),
    119: Xid("GSP RPC timeout", "error", RESET),
    120: Xid("GSP error", "error", RESET),
}

UNKNOWN = Xid(
    "an Xid this table does not name",
    "warning",
    "look the code up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors)",
)


def xid_of(code: int) -> Xid:
    return XIDS.get(code, UNKNOWN)
