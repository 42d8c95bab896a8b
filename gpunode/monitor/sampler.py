"""Keep one stream per host alive, feeding a Board; reconnect with capped backoff.

UI-free: `Sampler(board, sources).start()` works in any program. Each host
gets a daemon thread because its stream blocks for as long as the host is up;
daemon threads also let a program exit while a stream is stuck on a dead link.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence

from gpunode.monitor.board import Board
from gpunode.monitor.model import GpuSample
from gpunode.monitor.sources import GpusUnreadable, Source

SourceFactory = Callable[[], Source]


def backoff_delays(first: float = 1.0, cap: float = 30.0, factor: float = 2.0) -> list[float]:
    """The waits between reconnects: first, first*factor, ... up to cap (then cap forever)."""
    delays, d = [], first
    while d < cap:
        delays.append(d)
        d *= factor
    delays.append(cap)
    return delays


class Sampler:
    def __init__(
        self,
        board: Board,
        sources: Mapping[str, SourceFactory],
        *,
        backoff_first: float = 1.0,
        backoff_cap: float = 30.0,
    ) -> None:
        self.board = board
        self.sources = dict(sources)
        self.delays = backoff_delays(backoff_first, backoff_cap)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._live: dict[str, Source] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        for host in self.sources:
            t = threading.Thread(
                target=self.run_host, args=(host,), name=f"gpu-{host}", daemon=True
            )
            t.start()
            self._threads.append(t)

    def stop(self, wait: float = 0.0) -> None:
        self._stop.set()
        with self._lock:
            live = list(self._live.values())
        for src in live:
            with contextlib.suppress(Exception):
                src.close()  # unblocks a stream waiting on the network
        for t in self._threads:
            t.join(wait)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def run_host(self, host: str) -> None:
        """Blocking: stream `host` until stop(), reconnecting after each failure."""
        failures = 0
        unreadable = ""
        while not self._stop.is_set():
            if not unreadable:  # an unreadable host stays so while it is looked at again
                self.board.set_status(host, "connecting")
            got = threading.Event()
            unreadable = ""
            try:
                src = self.sources[host]()
                with self._lock:
                    self._live[host] = src
                self.board.set_source(host, src.name)

                def on_samples(samples: Sequence[GpuSample], _got: threading.Event = got) -> None:
                    _got.set()
                    self.board.add_samples(host, samples)

                src.stream(
                    on_samples,
                    lambda procs: self.board.set_processes(host, procs),
                    self._stop,
                )
                reason = "stream ended"
            except GpusUnreadable as exc:
                # The link works: say why the GPUs cannot be read, whole, and look again
                # at the slowest pace (no reconnect storm, no "unreachable").
                unreadable = str(exc)
            except Exception as exc:  # any failure: keep the view, retry later
                reason = str(exc) or type(exc).__name__
            finally:
                with self._lock:
                    src_now = self._live.pop(host, None)
                if src_now is not None:
                    with contextlib.suppress(Exception):
                        src_now.close()
            if self._stop.is_set():
                return
            if unreadable:
                self.board.set_status(host, "unreadable", unreadable)
                self._stop.wait(self.delays[-1])
                continue
            failures = 0 if got.is_set() else failures + 1
            delay = self.delays[min(failures, len(self.delays) - 1)]
            # The retry first: a narrow column cuts the reason, not the wait.
            self.board.set_status(host, "stale", f"retry in {delay:g}s: {reason}")
            self._stop.wait(delay)
