"""Work on many hosts at once: bounded parallelism, one transport per host, isolation.

One host's failure (unreachable, wrong sudo password, a bug) never stops the
others; every transport is closed at the end. Progress goes out as events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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


@dataclass
class Outcome(Generic[T]):
    host: str
    status: Literal["ok", "unreachable", "failed"]
    value: T | None = None
    error: str = ""
    seconds: float = 0.0
    hostkey_changed: bool = False
    """Unreachable because the host offered a key other than the known one (or a revoked
    one): someone may be in between. Callers that know it report "hostkey-changed" (exit 6);
    the others still see an unreachable host."""

    @property
    def state(self) -> Literal["ok", "unreachable", "failed", "hostkey-changed"]:
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
) -> dict[str, Outcome[T]]:
    """Connect to each host (`fork_count` at once), call `work(transport, host)`.

    `become_password` is the -K password (None: each host's become_password_env).
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
        bus.emit(HostConnecting(host.name, target=host.target))
        try:
            transport = opener(host, become_password_for(host, become_password))
        except Exception as exc:
            return _failed(bus, host.name, f"cannot set up a connection: {exc}", start)
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
            transport.close()

    results: dict[str, Outcome[T]] = {}
    if not hosts:
        return results
    with ThreadPoolExecutor(
        max_workers=min(fork_count(forks, len(hosts)), len(hosts)),
        thread_name_prefix="gpunode-host",
    ) as pool:
        for host, outcome in zip(hosts, pool.map(one, hosts), strict=True):
            results[host.name] = outcome
    return results


def _failed(bus: Bus, name: str, message: str, start: float) -> Outcome[T]:
    bus.emit(HostStatusChanged(name, status="failed", detail=message))
    return Outcome(name, "failed", error=message, seconds=time.monotonic() - start)
