"""Serve a mirror's folder read-only over HTTP (GET and HEAD; no listing, no uploads)."""

from __future__ import annotations

import functools
import http.server
import os
import socket
from pathlib import Path
from typing import Any

DEFAULT_BIND = "127.0.0.1:8470"


class _Handler(http.server.SimpleHTTPRequestHandler):
    """The standard library's static handler without directory listings; files only."""

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(404, "no listing")
        return None

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line a file would drown the terminal during a fleet's apply


def parse_bind(bind: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) -> (host, port); ValueError saying what is wrong."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--bind {bind!r}: expected HOST:PORT, e.g. {DEFAULT_BIND}")
    return host.strip("[]") or "127.0.0.1", int(port)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def server(root: Path, bind: str = DEFAULT_BIND) -> http.server.ThreadingHTTPServer:
    """A server of `root` on `bind`, not yet serving (call serve_forever)."""
    host, port = parse_bind(bind)
    handler = functools.partial(_Handler, directory=str(root))
    return (_Server6 if ":" in host else _Server)((host, port), handler)
