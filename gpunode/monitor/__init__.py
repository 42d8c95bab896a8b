"""Live GPU statistics from many hosts, independent of any view.

board = Board(["gpu1", "gpu2"])
sampler = Sampler(board, {"gpu1": lambda: SmiSource("gpu1", transport1), ...})
sampler.start()
... board.drain(), board.view("gpu1") ...
"""

from gpunode.monitor.board import Board, HostView
from gpunode.monitor.model import GpuProcess, GpuSample, LinkStatus
from gpunode.monitor.nvml import NvmlSource
from gpunode.monitor.sampler import Sampler, backoff_delays
from gpunode.monitor.sources import GpusUnreadable, SmiSource, Source, StreamEnded

__all__ = [
    "Board",
    "GpuProcess",
    "GpuSample",
    "GpusUnreadable",
    "HostView",
    "LinkStatus",
    "NvmlSource",
    "Sampler",
    "SmiSource",
    "Source",
    "StreamEnded",
    "backoff_delays",
]
