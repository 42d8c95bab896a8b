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
from gpunode.transport.base import HostUnreachableError, Transport, TransportError
from gpunode.transport.secret import Secret

if TYPE_CHECKING:
    from gpunode.inventory.model import Host

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    host: str
    status: Literal["ok", "unreachable", "failed"]
    value: T | None = None
    error: str = ""
    seconds: float = 0.0


Opener = Callable[["Host", Secret | None], Transport]


def _default_opener(host: Host, password: Secret | None) -> Transport:
    from gpunode.transport.connect import open_transport

    return open_transport(host, become_password=password)


def run_hosts(
    hosts: Sequence[Host],
    work: Callable[[Transport, Host], T],
    *,
    bus: Bus,
    forks: int = 10,
    become_password: Secret | None = None,
    opener: Opener = _default_opener,
) -> dict[str, Outcome[T]]:
    """Connect to each host (at most `forks` at once), call `work(transport, host)`.

    `become_password` is the -K password (None: each host's become_password_env).
    Returns one Outcome per host name, in the order given.
    """
    from gpunode.transport.connect import become_password_for

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
                bus.emit(HostUnreachable(host.name, reason=str(exc)))
                return Outcome(
                    host.name, "unreachable", error=str(exc), seconds=time.monotonic() - start
                )
            bus.emit(HostConnected(host.name, target=host.target, seconds=time.monotonic() - start))
            try:
                value = work(transport, host)
            except HostUnreachableError as exc:
                bus.emit(HostUnreachable(host.name, reason=str(exc)))
                return Outcome(
                    host.name, "unreachable", error=str(exc), seconds=time.monotonic() - start
                )
            except Exception as exc:
                return _failed(bus, host.name, str(exc) or type(exc).__name__, start)
            return Outcome(host.name, "ok", value=value, seconds=time.monotonic() - start)
        finally:
            transport.close()

    results: dict[str, Outcome[T]] = {}
    if not hosts:
        return results
    with ThreadPoolExecutor(
        max_workers=max(1, min(forks, len(hosts))), thread_name_prefix="gpunode-host"
    ) as pool:
        for host, outcome in zip(hosts, pool.map(one, hosts), strict=True):
            results[host.name] = outcome
    return results


def _failed(bus: Bus, name: str, message: str, start: float) -> Outcome[T]:
    bus.emit(HostStatusChanged(name, status="failed", detail=message))
    return Outcome(name, "failed", error=message, seconds=time.monotonic() - start)
