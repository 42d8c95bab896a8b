"""What the GPU monitor measures: one sample per GPU per tick, and GPU processes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LinkStatus = Literal["connecting", "live", "stale", "down"]
"""live: samples arriving; stale: the stream dropped or went quiet, last values kept;
down: never got a sample (unreachable or no GPU tooling)."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    host: str
    index: int
    name: str
    uuid: str
    util: float | None  # percent
    mem_used: int | None  # MiB
    mem_total: int | None  # MiB
    temp: float | None  # Celsius
    power_draw: float | None  # W
    power_limit: float | None  # W
    sm_clock: int | None  # MHz
    ts: float
    driver: str = ""  # the driver's version, e.g. 580.159.04
    mem_free: int | None = None  # MiB, as nvidia-smi's memory.free (total - reserved - used)
    mem_clock: int | None = None  # MHz
    bus_id: str = ""  # e.g. 00000000:00:06.0


@dataclass(frozen=True, slots=True)
class GpuProcess:
    host: str
    gpu: int  # GPU index on that host (-1 when the uuid is not known yet)
    pid: int
    user: str
    used_mem: int | None  # MiB
    command: str
