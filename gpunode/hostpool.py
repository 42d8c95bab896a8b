"""Work on many hosts at once: bounded parallelism, one transport per host, isolation.

One host's failure (unreachable, wrong sudo password, a bug) never stops the
others; every transport is closed at the end. Progress goes out as events. A `Stop` asked
for (Ctrl-C, SIGTERM, a closed stdout, the TUI's quit) starts no more hosts; the work
itself reads it between its steps, and its `cut` closes the transports in use.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from gpunode.events import Bus, HostConnected, HostConnecting, HostStatusChanged, HostUnreachable
from gpunode.transport.base import (
    HostKeyChangedError,
    HostUnreachableError,
    Transport,
    TransportError,
)
from gpunode.transport.secret import Secret

if TYPE_CHECKING:
    from gpunode.inventory.model import Host

T = TypeVar("T")

MAX_FORKS = 50


def fork_count(forks: int | None, hosts: int) -> int:
    """Hosts worked on at once: `forks` when given, else every host, up to MAX_FORKS."""
    return forks or max(1, min(hosts, MAX_FORKS))


class Stop:
    """A run's cooperative stop, shared by the threads of one run.

    `request(reason)` (the first Ctrl-C, SIGTERM, a closed stdout, the TUI's quit): no new
    host starts, and the work reads `requested` between its steps, letting the command a
    host runs finish. `cut()` (a second Ctrl-C) also closes every transport in use, which
    ends the commands that run. Setting the flag is all a signal handler does."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._open: set[Transport] = set()
        self.reason = ""
        self.code = 0
        """The exit status the stop asks for (130 Ctrl-C, 143 SIGTERM...)."""
        self.was_cut = False

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def request(self, reason: str, code: int) -> bool:
        """Ask the run to stop; True the first time (the reason and code kept are the first)."""
        with self._lock:
            if self._event.is_set():
                return False
            self.reason, self.code = reason, code
            self._event.set()
            return True

    def cut(self) -> None:
        """Stop, and close every transport in use: a running command ends now."""
        self.request("cut", 130)
        with self._lock:
            self.was_cut = True
            transports = list(self._open)
        for t in transports:
            with contextlib.suppress(Exception):  # a broken session may raise anything: gone
                t.close()

    def track(self, transport: Transport, in_use: bool) -> None:
        with self._lock:
            if in_use:
                self._open.add(transport)
            else:
                self._open.discard(transport)


@dataclass
class Outcome(Generic[T]):
    host: str
    status: Literal["ok", "unreachable", "failed", "skipped"]
    value: T | None = None
    error: str = ""
    seconds: float = 0.0
    hostkey_changed: bool = False
    """Unreachable because the host offered a key other than the known one (or a revoked
    one): someone may be in between. Callers that know it report "hostkey-changed" (exit 6);
    the others still see an unreachable host."""

    @property
    def state(self) -> Literal["ok", "unreachable", "failed", "skipped", "hostkey-changed"]:
        return "hostkey-changed" if self.hostkey_changed else self.status

    @property
    def summary(self) -> str:
        """One line for a host without a value: "unreachable: why", or the key's message
        ("host key changed for ...", "host key is revoked: ...")."""
        return self.error if self.hostkey_changed else f"{self.status}: {self.error}"


Opener = Callable[["Host", Secret | None], Transport]


def _default_opener(host: Host, password: Secret | None) -> Transport:
    from gpunode.transport.connect import open_transport

    return open_transport(host, become_password=password)


def run_hosts(
    hosts: Sequence[Host],
    work: Callable[[Transport, Host], T],
    *,
    bus: Bus,
    forks: int | None = None,
    become_password: Secret | None = None,
    opener: Opener = _default_opener,
    stop: Stop | None = None,
) -> dict[str, Outcome[T]]:
    """Connect to each host (`fork_count` at once), call `work(transport, host)`.

    `become_password` is the -K password (None: each host's become_password_env). Once
    `stop` is requested, a host not started yet is "skipped". The workers are daemon
    threads: a run cut short never holds the interpreter's exit.
    Returns one Outcome per host name, in the order given.
    """
    from gpunode.transport.connect import become_password_for, take_become_passwords

    if become_password is None:
        take_become_passwords(hosts)  # out of the environment before any work starts

    def unreachable(host: Host, exc: TransportError, start: float) -> Outcome[T]:
        bus.emit(HostUnreachable(host.name, reason=str(exc)))
        return Outcome(
            host.name,
            "unreachable",
            error=str(exc),
            seconds=time.monotonic() - start,
            hostkey_changed=isinstance(exc, HostKeyChangedError),
        )

    def one(host: Host) -> Outcome[T]:
        start = time.monotonic()
        if stop is not None and stop.requested:
            return Outcome(host.name, "skipped", error=f"not started: {stop.reason}")
        bus.emit(HostConnecting(host.name, target=host.target))
        try:
            transport = opener(host, become_password_for(host, become_password))
        except Exception as exc:
            return _failed(bus, host.name, f"cannot set up a connection: {exc}", start)
        if stop is not None:
            stop.track(transport, True)
        try:
            try:
                transport.connect()
            except TransportError as exc:
                return unreachable(host, exc, start)
            bus.emit(HostConnected(host.name, target=host.target, seconds=time.monotonic() - start))
            try:
                value = work(transport, host)
            except HostUnreachableError as exc:
                return unreachable(host, exc, start)
            except Exception as exc:
                return _failed(bus, host.name, str(exc) or type(exc).__name__, start)
            return Outcome(host.name, "ok", value=value, seconds=time.monotonic() - start)
        finally:
            if stop is not None:
                stop.track(transport, False)
            transport.close()

    if not hosts:
        return {}
    todo = deque(enumerate(hosts))
    done: dict[int, Outcome[T]] = {}
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i, host = todo.popleft()
            start = time.monotonic()
            try:
                outcome = one(host)
            except Exception as exc:  # an event's subscriber failed: this host alone
                outcome = Outcome(host.name, "failed", error=str(exc) or type(exc).__name__,
                                  seconds=time.monotonic() - start)  # fmt: skip
            with lock:
                done[i] = outcome

    workers = [
        threading.Thread(target=worker, name=f"gpunode-host-{n}", daemon=True)
        for n in range(min(fork_count(forks, len(hosts)), len(hosts)))
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {host.name: done[i] for i, host in enumerate(hosts)}


def _failed(bus: Bus, name: str, message: str, start: float) -> Outcome[T]:
    bus.emit(HostStatusChanged(name, status="failed", detail=message))
    return Outcome(name, "failed", error=message, seconds=time.monotonic() - start)
