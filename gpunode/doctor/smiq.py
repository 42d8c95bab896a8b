"""`nvidia-smi -q` as text, one GPU's block at a time: each value under the path of the
sections it sits in ("ECC Errors/Volatile/DRAM Uncorrectable"), with the line it came from,
so a finding can quote the exact line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_ROW = re.compile(r"^( *)(\S.*?)\s*(?::\s*(.*?))?\s*$")


@dataclass
class SmiGpuQuery:
    """One GPU of `nvidia-smi -q`: path -> (value, the line as printed)."""

    bus_id: str
    values: dict[str, tuple[str, str]] = field(default_factory=dict)

    def get(self, path: str) -> str | None:
        hit = self.values.get(path)
        return hit[0] if hit else None

    def line(self, path: str) -> str:
        hit = self.values.get(path)
        return hit[1] if hit else ""

    def under(self, section: str) -> dict[str, tuple[str, str]]:
        """Every value below `section`, keyed by the rest of its path."""
        prefix = section + "/"
        return {k[len(prefix) :]: v for k, v in self.values.items() if k.startswith(prefix)}

    def number(self, path: str) -> float | None:
        """A value's leading number ("40 C", "16x", "-2 C"); None for N/A or absent."""
        m = re.match(r"-?\d+(?:\.\d+)?", self.get(path) or "")
        return float(m.group()) if m else None


def parse_smi_q(text: str) -> list[SmiGpuQuery]:
    """Every GPU block of `nvidia-smi -q`; the header before the first is skipped."""
    gpus: list[SmiGpuQuery] = []
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        head = _GPU.match(line)
        if head:
            gpus.append(SmiGpuQuery(head.group(1)))
            stack = []
            continue
        m = _ROW.match(line)
        if not gpus or not m or not line.strip():
            continue
        indent, key, value = len(m.group(1)), m.group(2), m.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([*(k for _, k in stack), key])
        if value is None:
            stack.append((indent, key))
        else:
            gpus[-1].values[path] = (value, line.strip())
    return gpus
