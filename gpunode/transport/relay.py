"""Forwards that gpunode carries itself (paramiko, `connection: local`): byte pumps.

A `Relay` owns what one transport forwards: listeners whose every connection is joined to
a fresh one made by a `dial` function, two daemon threads per joined pair. close() stops
the listeners and every pair. (The openssh transport needs none of this: its
ControlMaster forwards.)
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from typing import Protocol

from gpunode.transport.base import TransportError

CHUNK = 65536


class Stream(Protocol):
    """A socket or a paramiko channel."""

    def recv(self, size: int) -> bytes: ...

    def sendall(self, data: bytes) -> None: ...

    def close(self) -> None: ...


def _shut_write(stream: Stream) -> None:
    with contextlib.suppress(OSError, EOFError):
        if isinstance(stream, socket.socket):
            stream.shutdown(socket.SHUT_WR)
        else:
            stream.shutdown_write()  # type: ignore[attr-defined]


def unix_listener(path: str) -> socket.socket:
    """A listening unix socket at `path`, 0600 (its folder should be private too)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    except OSError as exc:
        sock.close()
        raise TransportError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old)
    sock.listen(64)
    return sock


def unix_dialer(path: str) -> Callable[[], Stream]:
    def dial() -> Stream:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        return sock

    return dial


def loopback_dialer(port: int) -> Callable[[], Stream]:
    return lambda: socket.create_connection(("127.0.0.1", port), timeout=30)


class Relay:
    """The forwards of one transport."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[Stream | socket.socket] = set()
        self._closed = False

    def _track(self, *items: Stream | socket.socket) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._open.update(items)
            return True

    def join(self, inbound: Stream, dial: Callable[[], Stream]) -> None:
        """Connect `inbound` to a fresh `dial()` and pump both ways until either ends."""
        try:
            outbound = dial()
        except Exception:  # the far end is gone or refuses: drop this connection only
            inbound.close()
            return
        if isinstance(outbound, socket.socket):
            outbound.settimeout(None)
        if not self._track(inbound, outbound):
            inbound.close()
            outbound.close()
            return
        done = threading.Barrier(2, action=lambda: self._drop(inbound, outbound))
        for a, b in ((inbound, outbound), (outbound, inbound)):
            threading.Thread(target=self._pump, args=(a, b, done), daemon=True).start()

    @staticmethod
    def _pump(src: Stream, dst: Stream, done: threading.Barrier) -> None:
        with contextlib.suppress(Exception):  # a side that broke ends the pair
            while data := src.recv(CHUNK):
                dst.sendall(data)
        _shut_write(dst)
        with contextlib.suppress(threading.BrokenBarrierError):
            done.wait()

    def _drop(self, *items: Stream | socket.socket) -> None:
        with self._lock:
            self._open.difference_update(items)
        for item in items:
            with contextlib.suppress(Exception):
                item.close()

    def serve(self, listener: socket.socket, dial: Callable[[], Stream]) -> None:
        """Accept on `listener` (in a daemon thread) and join every connection to `dial()`."""
        if not self._track(listener):
            listener.close()
            return

        def accept() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return  # closed
                threading.Thread(target=self.join, args=(conn, dial), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            items, self._open = list(self._open), set()
        for item in items:
            with contextlib.suppress(Exception):
                if isinstance(item, socket.socket) and item.type == socket.SOCK_STREAM:
                    with contextlib.suppress(OSError):
                        item.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept()
                item.close()
