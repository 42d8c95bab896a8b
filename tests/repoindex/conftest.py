"""A flat apt repository served on loopback that honours validators and counts requests."""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import http.server
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FIX = Path(__file__).parent.parent / "fixtures" / "repoindex"
REPO_PATH = "/cuda/repos/ubuntu2204/x86_64/"


@dataclass
class _File:
    body: bytes
    etag: str | None
    modified: float | None


@dataclass
class Repo:
    """What the server serves (path -> file, redirect, status) and what it was asked."""

    base: str  # http://127.0.0.1:PORT
    files: dict[str, _File] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    drip: set[str] = field(default_factory=set)  # paths sent one byte at a time, forever
    no_length: set[str] = field(default_factory=set)  # sent without Content-Length
    short: set[str] = field(default_factory=set)  # Content-Length promises more than is sent
    hold: threading.Event | None = None  # when set up, requests wait for it
    counts: Counter[str] = field(default_factory=Counter)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    close: Callable[[], None] = lambda: None  # stops the server: its port refuses from then on

    @property
    def url(self) -> str:
        return self.base + REPO_PATH

    def put(
        self,
        name: str,
        body: bytes,
        *,
        etag: str | None = "auto",
        modified: float | None = 1_700_000_000.0,
    ) -> None:
        """Serve `body` as REPO_PATH + name; etag "auto" derives one from the body."""
        if etag == "auto":
            etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
        self.files[REPO_PATH + name] = _File(body, etag, modified)

    def headers_of(self, path: str) -> list[dict[str, str]]:
        with self.lock:
            return [h for p, h in self.requests if p == path]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        repo = self.server.repo
        with repo.lock:
            repo.counts[self.path] += 1
            repo.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        if repo.hold is not None:
            repo.hold.wait(30)
        if self.path in repo.redirects:
            self.send_response(302)
            self.send_header("Location", repo.redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path in repo.statuses:
            self.send_error(repo.statuses[self.path])
            return
        f = repo.files.get(self.path)
        if f is None:
            self.send_error(404)
            return
        if self.path in repo.drip:
            self._drip(repo)
            return
        if self._not_modified(f):
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(200)
        if self.path not in repo.no_length:  # HTTP/1.0: the body then ends when we close
            extra = 100 if self.path in repo.short else 0
            self.send_header("Content-Length", str(len(f.body) + extra))
        if f.etag:
            self.send_header("ETag", f.etag)
        if f.modified is not None:
            self.send_header("Last-Modified", email.utils.formatdate(f.modified, usegmt=True))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client may refuse a body and hang up
            self.wfile.write(f.body)

    def _not_modified(self, f: _File) -> bool:
        inm = self.headers.get("If-None-Match")
        if inm is not None:  # RFC 9110: If-None-Match wins over If-Modified-Since
            return f.etag is not None and inm == f.etag
        ims = self.headers.get("If-Modified-Since")
        if ims and f.modified is not None:
            return email.utils.parsedate_to_datetime(ims).timestamp() >= int(f.modified)
        return False

    def _drip(self, repo: Repo) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(10**9))
        self.end_headers()
        try:
            while not repo.stop.is_set():
                self.wfile.write(b"P")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass  # the client gave up


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    repo: Repo


@pytest.fixture
def repo() -> Iterator[Repo]:
    server = _Server(("127.0.0.1", 0), _Handler)
    host, port = server.server_address[:2]
    repo = server.repo = Repo(f"http://{host!s}:{port}")

    def close() -> None:
        repo.stop.set()
        if repo.hold is not None:
            repo.hold.set()
        server.shutdown()
        server.server_close()

    repo.close = close
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield repo
    finally:
        close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # Loopback only: a proxy from the environment must not see these requests.
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
