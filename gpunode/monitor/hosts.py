"""Sampling the GPUs of inventory hosts: how to reach each, and a Board kept fed meanwhile."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from gpunode.monitor.board import Board
from gpunode.monitor.sampler import Sampler, SourceFactory
from gpunode.monitor.sources import NvmlSource, SmiSource, Source

if TYPE_CHECKING:
    from gpunode.inventory.model import Host


def source_for(host: Host, interval: float, use_nvml: bool) -> SourceFactory:
    """How to reach one host's GPUs: NVML in-process for this machine when it works,
    otherwise one long-lived nvidia-smi stream over the host's transport."""

    def make() -> Source:
        if host.connection == "local" and use_nvml:
            return NvmlSource(host.name, interval=interval)
        from gpunode.transport.connect import open_transport

        return SmiSource(host.name, open_transport(host), interval=interval)

    return make


@contextlib.contextmanager
def sampling(
    hosts: Sequence[Host], *, interval: float, use_nvml: bool, stale_after: float
) -> Iterator[Board]:
    """A Board that a started Sampler feeds from every host until the block ends."""
    board = Board([h.name for h in hosts], stale_after=stale_after)
    sampler = Sampler(board, {h.name: source_for(h, interval, use_nvml) for h in hosts})
    sampler.start()
    try:
        yield board
    finally:
        sampler.stop()
