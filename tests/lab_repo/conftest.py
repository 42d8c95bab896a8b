"""A lab repository built once per test session and served over HTTP on loopback."""

from __future__ import annotations

import functools
import http.server
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


@pytest.fixture(scope="session")
def served_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRepo]:
    dest = tmp_path_factory.mktemp("labrepo")
    # The port is held from before the build (which names it in the repository) until the
    # end: a port found free and released could be another process's by the time the
    # build is done, some seconds later on a busy machine.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        root = build_repository(dest, url)
        server.RequestHandlerClass = functools.partial(_Quiet, directory=str(root))
        serving = threading.Thread(target=server.serve_forever, daemon=True)
        serving.start()
        yield ServedRepo(dest, root, url)
        server.shutdown()
    finally:
        server.server_close()
