"""A lab repository built once per test session and served over HTTP on loopback."""

from __future__ import annotations

import functools
import http.server
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpunode_lab.repo import build_repository


@dataclass(frozen=True)
class ServedRepo:
    dest: Path
    root: Path
    url: str


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def served_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRepo]:
    dest = tmp_path_factory.mktemp("labrepo")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    root = build_repository(dest, url)
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ServedRepo(dest, root, url)
    finally:
        server.shutdown()
        server.server_close()
