"""The mirror tests' upstream: an http.server on loopback that logs each request."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[Path, str, list[str]]]:
    root, asked = tmp_path / "up", []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            asked.append(f"{self.path} {code}")

    root.mkdir()
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(root))
    )
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}/ubuntu2204/x86_64/", asked
    srv.shutdown()
    srv.server_close()
