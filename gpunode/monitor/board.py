"""The monitor's shared state: latest samples, short history, processes, link status.

Sampler threads write here under one lock; views read a copy on their own
timer (`drain` says which hosts changed), so a view redraws once per tick
however many samples arrived.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from gpunode.monitor.model import GpuProcess, GpuSample, LinkStatus

HISTORY = 60
GPUS_MAX = 64
"""GPUs kept per host: more than any machine has; rows a host invents past them (a spewing or
hostile host printing new indexes) are dropped instead of growing the board."""


@dataclass
class HostView:
    """A copy of one host's state, safe to read outside the lock."""

    name: str
    status: LinkStatus = "connecting"
    detail: str = ""
    source: str = ""
    gpus: dict[int, GpuSample] = field(default_factory=dict)
    history: dict[int, list[float]] = field(default_factory=dict)
    processes: list[GpuProcess] = field(default_factory=list)
    last_ts: float | None = None
    stale: bool = False

    @property
    def link(self) -> LinkStatus:
        """The status to show: live turns stale when samples stop arriving."""
        if self.status == "live" and self.stale:
            return "stale"
        return self.status


@dataclass
class _Host:
    status: LinkStatus = "connecting"
    detail: str = ""
    source: str = ""
    gpus: dict[int, GpuSample] = field(default_factory=dict)
    history: dict[int, deque[float]] = field(default_factory=dict)
    processes: list[GpuProcess] = field(default_factory=list)
    last_ts: float | None = None


class Board:
    def __init__(
        self,
        hosts: Iterable[str] = (),
        *,
        history: int = HISTORY,
        stale_after: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._lock = threading.Lock()
        self._hosts: dict[str, _Host] = {h: _Host() for h in hosts}
        self._dirty: set[str] = set(self._hosts)
        self._history = history
        self.stale_after = stale_after
        self.clock = clock

    def _host(self, host: str) -> _Host:
        h = self._hosts.get(host)
        if h is None:
            h = self._hosts[host] = _Host()
        return h

    @property
    def hosts(self) -> list[str]:
        with self._lock:
            return list(self._hosts)

    def add_samples(self, host: str, samples: Sequence[GpuSample]) -> None:
        if not samples:
            return
        with self._lock:
            h = self._host(host)
            for s in samples:
                if s.index not in h.gpus and len(h.gpus) >= GPUS_MAX:
                    continue
                h.gpus[s.index] = s
                hist = h.history.get(s.index)
                if hist is None:
                    hist = h.history[s.index] = deque(maxlen=self._history)
                hist.append(s.utilization_pct if s.utilization_pct is not None else 0.0)
                h.last_ts = s.ts
            h.status = "live"
            h.detail = ""
            self._dirty.add(host)

    def set_processes(self, host: str, processes: Sequence[GpuProcess]) -> None:
        with self._lock:
            h = self._host(host)
            if h.processes != list(processes):
                h.processes = list(processes)
                self._dirty.add(host)

    def set_status(self, host: str, status: LinkStatus, detail: str = "", source: str = "") -> None:
        with self._lock:
            h = self._host(host)
            if status == "stale" and h.last_ts is None:
                status = "down"  # nothing to keep: say so
            h.status, h.detail = status, detail
            if source:
                h.source = source
            self._dirty.add(host)

    def set_source(self, host: str, source: str) -> None:
        with self._lock:
            self._host(host).source = source
            self._dirty.add(host)

    def drain(self) -> set[str]:
        """Hosts changed since the last call."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            return dirty

    def view(self, host: str) -> HostView:
        now = self.clock()
        with self._lock:
            h = self._host(host)
            stale = h.last_ts is not None and now - h.last_ts > self.stale_after
            return HostView(
                name=host,
                status=h.status,
                detail=h.detail,
                source=h.source,
                gpus=dict(h.gpus),
                history={i: list(d) for i, d in h.history.items()},
                processes=list(h.processes),
                last_ts=h.last_ts,
                stale=stale,
            )

    def links(self) -> dict[str, LinkStatus]:
        """Every host's shown status, cheaply (no copies): lets a view notice hosts going quiet."""
        now = self.clock()
        out: dict[str, LinkStatus] = {}
        with self._lock:
            for name, h in self._hosts.items():
                quiet = h.last_ts is not None and now - h.last_ts > self.stale_after
                out[name] = "stale" if h.status == "live" and quiet else h.status
        return out

    def views(self) -> list[HostView]:
        return [self.view(h) for h in self.hosts]
