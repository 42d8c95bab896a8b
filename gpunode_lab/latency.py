"""Added latency for one host: a TCP relay in front of its sshd that holds every chunk.

tc netem would do this in the kernel, but not every kernel has it (this project's CI
machine does not), and every lab address shares `lo`. So while the knob is on, the
host's sshd listens on port+10000 and this relay takes the host's SSH port, delaying
each direction by half the requested time: each round trip takes MS longer.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time

PORT_OFFSET = 10000


class LatencyRelay:
    def __init__(self, address: str, port: int, ms: int) -> None:
        self.target = (address, port + PORT_OFFSET)
        self.delay = ms / 2000.0
        self.closed = False
        self.socks: list[socket.socket] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, port))
        self.sock.listen(128)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self.socks += [client, server]
            for src, dst in ((client, server), (server, client)):
                self._pipe(src, dst)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def read() -> None:
            while True:
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                chunks.put((time.monotonic() + self.delay, data))
                if not data:
                    return

        def write() -> None:
            while True:
                due, data = chunks.get()
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                try:
                    if not data:
                        dst.shutdown(socket.SHUT_WR)
                        return
                    dst.sendall(data)
                except OSError:
                    with contextlib.suppress(OSError):
                        src.shutdown(socket.SHUT_RDWR)
                    return

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for s in self.socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
