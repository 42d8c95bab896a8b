"""Sampling the GPUs of inventory hosts: how to reach each, and a Board kept fed meanwhile."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from gpunode.monitor.board import Board, HostView
from gpunode.monitor.heap import keep_small
from gpunode.monitor.nvml import NvmlSource
from gpunode.monitor.sampler import Sampler, SourceFactory
from gpunode.monitor.sources import SmiSource, Source

if TYPE_CHECKING:
    from gpunode.inventory.model import Host


def source_for(
    host: Host, interval: float, use_nvml: bool, processes: bool = True, counters: bool = False
) -> SourceFactory:
    """How to reach one host's GPUs: NVML in-process for this machine when it works,
    otherwise one long-lived nvidia-smi stream over the host's transport. A stream is
    given up as silent after three intervals without output (15 s at least). `counters`: the
    exporter's DCGM counters that only `nvidia-smi dmon` has, on a second stream."""

    def make() -> Source:
        if host.connection == "local" and use_nvml:
            return NvmlSource(host.name, interval=interval)
        from gpunode.transport.connect import open_transport

        return SmiSource(
            host.name,
            open_transport(host),
            interval=interval,
            process_every=5.0 if processes else None,
            quiet_limit=max(15.0, 3 * interval),
            dmon=counters,
        )

    return make


@contextlib.contextmanager
def sampling(
    hosts: Sequence[Host],
    *,
    interval: float,
    use_nvml: bool,
    stale_after: float,
    processes: bool = True,
    counters: bool = False,
) -> Iterator[Board]:
    """A Board that a started Sampler feeds from every host until the block ends
    (without GPU processes when `processes` is false: one command less per host)."""
    board = Board([h.name for h in hosts], stale_after=stale_after)
    sources = {h.name: source_for(h, interval, use_nvml, processes, counters) for h in hosts}
    sampler = Sampler(board, sources)
    trimming = threading.Event()
    keep_small(trimming)  # a long-running monitor's heap must not creep (heap.py says why)
    sampler.start()
    try:
        yield board
    finally:
        trimming.set()
        sampler.stop()


def first_views(board: Board, *, interval: float, timeout: float) -> list[HostView]:
    """Every host's view once each has sent a sample or failed (or `timeout` passed).
    After the last first sample it waits one more `interval`: a host's GPUs may come in
    over several reads, and its processes are read beside the first samples."""
    deadline = time.monotonic() + timeout

    def settled() -> bool:
        return all(v.gpus or v.status in ("down", "unreadable") for v in board.views())

    while not settled() and time.monotonic() < deadline:
        time.sleep(0.05)
    if any(v.gpus for v in board.views()):
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
    return board.views()
