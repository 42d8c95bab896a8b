"""What the GPU monitor measures: one sample per GPU per tick, and GPU processes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ConfigDict

from gpunode.smiquery import SmiGpu

LinkStatus = Literal["connecting", "live", "stale", "down", "unreadable"]
"""live: samples arriving; stale: the stream dropped or went quiet, last values kept;
down: never got a sample (unreachable); unreadable: the host answers but nvidia-smi cannot
read its GPUs (no driver, a version mismatch), the detail says why."""


class GpuSample(SmiGpu):
    """One GPU's reading at `ts` on `host`: the facts' GPU model (gpunode.smiquery), timed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str
    ts: float


@dataclass(frozen=True, slots=True)
class GpuProcess:
    host: str
    gpu: int  # GPU index on that host (-1 when the uuid is not known yet)
    pid: int
    user: str
    used_mem: int | None  # MiB
    command: str
