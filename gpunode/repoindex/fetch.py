"""Fetch one flat apt repository folder's Packages index over HTTP(S), with a disk cache.

Use one IndexCache per run: each repository URL is fetched at most once however many
threads ask; the rest wait for that fetch and share its outcome, index or error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from gpunode import __version__
from gpunode.repoindex.decompress import BadData, TooLarge, decompress
from gpunode.repoindex.packages import PackageIndex, parse_packages

if TYPE_CHECKING:
    from urllib.request import OpenerDirector

Source = Literal["fetched", "not modified (cached)", "cached, server unreachable"]
FETCHED: Final = "fetched"
NOT_MODIFIED: Final = "not modified (cached)"
STALE: Final = "cached, server unreachable"

VARIANTS = ("Packages.xz", "Packages.gz", "Packages")
MIRROR_MANIFEST = "gpunode-mirror.json"
"""In a folder `gpunode mirror` wrote: {"files": {Filename: sha256}} of the .debs it holds."""
DEFAULT_TIMEOUT = 10.0
DEFAULT_TOTAL_TIMEOUT = 120.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_CHUNK = 64 * 1024
_SCHEMES = ("http", "https")


class IndexUnavailable(Exception):
    """The index cannot be used on the controller: resolve versions on the host instead."""

    def __init__(self, url: str, reason: str, *, stale_available: bool = False) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.stale_available = stale_available  # a cached copy exists; allow_stale=True uses it


@dataclass(frozen=True)
class FetchedIndex:
    repo_url: str
    index_url: str  # the file read: .../Packages.xz, .gz or plain
    index: PackageIndex
    source: Source
    fetched_at: float  # epoch seconds when this copy was downloaded
    error: str = ""  # with STALE: why the server could not be used

    @property
    def stale(self) -> bool:
        return self.source == STALE


def default_cache_dir() -> Path:
    """GPUNODE_CACHE_DIR (or platformdirs' user_cache_dir("gpunode")) / "repoindex"."""
    env = os.environ.get("GPUNODE_CACHE_DIR")
    if env:
        return Path(env) / "repoindex"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("gpunode")) / "repoindex"


def _redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def normalize_repo_url(url: str) -> str:
    """The folder URL with a trailing slash; IndexUnavailable for what we will not fetch."""
    parts = urllib.parse.urlsplit(url.strip())
    try:
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise IndexUnavailable(_redact(url), "invalid port") from None
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise IndexUnavailable(_redact(url), "only http and https URLs are supported")
    if "@" in parts.netloc:  # error messages and the cache would carry the password
        raise IndexUnavailable(_redact(url), "credentials in the URL are not supported")
    if parts.query or parts.fragment:
        raise IndexUnavailable(url, "a repository folder URL has no query or fragment")
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class _Failure(Exception):
    def __init__(self, url: str, reason: str, *, try_next: bool = False) -> None:
        super().__init__(reason)
        self.url, self.reason, self.try_next = url, reason, try_next


def _why(err: object, timeout: float) -> str:
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, TimeoutError):
        return f"timed out after {timeout:g} s"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror[0].lower() + err.strerror[1:]
    return str(err) or type(err).__name__


@dataclass(frozen=True)
class _Entry:
    variant: str
    etag: str
    last_modified: str
    fetched_at: float
    body: bytes  # as served: still compressed for .xz / .gz


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    result: FetchedIndex | None = None
    error: IndexUnavailable | None = None
    stale: FetchedIndex | None = None


class IndexCache:
    """Packages indexes by repository folder URL, fetched once per instance, cached on disk.

    `cache_dir` defaults to default_cache_dir(). `timeout` bounds connecting and each read,
    `total_timeout` one whole download; `max_bytes` bounds the body, compressed and not.
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.timeout = timeout
        self.total_timeout = total_timeout
        self.max_bytes = max_bytes
        # Made on the first download, with http.client and urllib.request imported then: the
        # HTTPS handler loads the system's CA certificates (~20 ms), which a run that
        # downloads nothing (a converged host, a cached index) does not need.
        self._opener: OpenerDirector | None = None
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}
        self._manifests: dict[str, dict[str, str] | None] = {}

    def get(self, repo_url: str, *, allow_stale: bool = False) -> FetchedIndex:
        """The index of `repo_url`; raises IndexUnavailable saying which URL failed and why.

        With `allow_stale`, a cached copy is returned (source STALE) when the server fails.
        """
        url = normalize_repo_url(repo_url)
        with self._lock:
            slot = self._slots.setdefault(url, _Slot())
        with slot.lock:  # the first caller fetches; the others wait here for its outcome
            if not slot.done:
                slot.result, slot.error, slot.stale = self._load(url)
                slot.done = True
        if slot.result is not None:
            return slot.result
        if allow_stale and slot.stale is not None:
            return slot.stale
        assert slot.error is not None
        err = slot.error  # a fresh exception per caller: threads must not share a traceback
        raise IndexUnavailable(err.url, err.reason, stale_available=err.stale_available)

    def mirror_manifest(self, repo_url: str) -> dict[str, str] | None:
        """What a gpunode mirror's folder holds (Filename -> sha256), read once per
        instance; None for a folder without a manifest (not a gpunode mirror) or unreadable."""
        url = normalize_repo_url(repo_url)
        with self._lock:
            if url in self._manifests:
                return self._manifests[url]
        held: dict[str, str] | None = None
        with contextlib.suppress(_Failure, ValueError, KeyError, TypeError):
            got = self._download(url + MIRROR_MANIFEST, None)
            files = json.loads(got.body)["files"] if got is not None else None
            if isinstance(files, dict):
                held = {str(k): str(v) for k, v in files.items()}
        with self._lock:
            self._manifests[url] = held
        return held

    def cache_path(self, repo_url: str) -> Path:
        key = hashlib.sha256(normalize_repo_url(repo_url).encode()).hexdigest()
        return self.cache_dir / f"{key}.idx"

    def _load(
        self, url: str
    ) -> tuple[FetchedIndex | None, IndexUnavailable | None, FetchedIndex | None]:
        path = self.cache_path(url)
        cached = self._read_cache(path, url)
        order = list(VARIANTS)
        if cached is not None:  # try first the file that worked last time
            order.remove(cached.variant)
            order.insert(0, cached.variant)
        failures: list[_Failure] = []
        for variant in order:
            file_url = url + variant
            try:
                same = cached if cached is not None and cached.variant == variant else None
                got = self._download(file_url, same)
                entry = got or cached
                assert entry is not None
                index = self._parse(file_url, entry)
            except _Failure as f:
                failures.append(f)
                if f.try_next:
                    continue
                break
            if got is not None:
                self._write_cache(path, url, got)
            source: Source = FETCHED if got is not None else NOT_MODIFIED
            return FetchedIndex(url, file_url, index, source, entry.fetched_at), None, None
        if len(failures) == 1:
            err_url, reason = failures[0].url, failures[0].reason
        else:
            err_url = url
            reason = "no usable index: " + "; ".join(
                f"{f.url.rsplit('/', 1)[-1]}: {f.reason}" for f in failures
            )
        stale = None
        if cached is not None:
            with contextlib.suppress(_Failure):
                index = self._parse(url + cached.variant, cached)
                stale = FetchedIndex(
                    url,
                    url + cached.variant,
                    index,
                    STALE,
                    cached.fetched_at,
                    f"{err_url}: {reason}",
                )
        if stale is not None:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(stale.fetched_at))
            reason += f" (a cached copy from {when} exists; allow_stale=True uses it)"
        return None, IndexUnavailable(err_url, reason, stale_available=stale is not None), stale

    def _download(self, url: str, cached: _Entry | None) -> _Entry | None:
        """A fresh entry, or None when the server says `cached` is still current."""
        headers = {"User-Agent": f"gpunode/{__version__}", "Accept-Encoding": "identity"}
        if cached is not None and cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached is not None and cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified
        deadline = time.monotonic() + self.total_timeout
        import http.client
        import urllib.error
        import urllib.request

        from gpunode.repoindex.opener import RedirectRefused, safe_opener

        try:
            if self._opener is None:
                self._opener = safe_opener()
            resp = self._opener.open(
                urllib.request.Request(url, headers=headers), timeout=self.timeout
            )
        except RedirectRefused as e:
            why = f"redirect to {_redact(e.target)} refused: only http and https are followed"
            raise _Failure(_redact(e.url), why) from None
        except urllib.error.HTTPError as e:
            e.close()
            if e.code == 304 and cached is not None:
                return None
            missing = e.code in (404, 410)
            raise _Failure(url, f"HTTP {e.code} {e.reason}", try_next=missing) from None
        except urllib.error.URLError as e:
            raise _Failure(url, _why(e.reason, self.timeout)) from None
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise _Failure(url, _why(e, self.timeout)) from None
        with resp:
            length = resp.headers.get("Content-Length", "")
            if length.isascii() and length.isdigit() and int(length) > self.max_bytes:
                why = f"body of {length} bytes is over the {self.max_bytes} byte limit"
                raise _Failure(url, why)
            chunks, total = [], 0
            try:
                while chunk := resp.read1(_CHUNK):
                    total += len(chunk)
                    if total > self.max_bytes:
                        raise _Failure(url, f"body is over the {self.max_bytes} byte limit")
                    if time.monotonic() > deadline:
                        raise _Failure(url, f"download took over {self.total_timeout:g} s")
                    chunks.append(chunk)
            except (OSError, http.client.HTTPException) as e:
                raise _Failure(url, _why(e, self.timeout)) from None
            # read1 returns b"" at an early close; a cut plain index would parse fine.
            if length.isascii() and length.isdigit() and total != int(length):
                raise _Failure(url, f"connection closed after {total} of {length} bytes")
            etag = resp.headers.get("ETag", "")
            modified = resp.headers.get("Last-Modified", "")
        variant = url.rsplit("/", 1)[-1]
        return _Entry(variant, etag, modified, time.time(), b"".join(chunks))

    def _parse(self, url: str, entry: _Entry) -> PackageIndex:
        try:
            text = decompress(entry.variant, entry.body, self.max_bytes)
        except TooLarge:
            raise _Failure(
                url, f"decompressed index is over the {self.max_bytes} byte limit"
            ) from None
        except BadData as e:
            raise _Failure(url, str(e), try_next=True) from None
        return parse_packages(text.decode("utf-8", errors="replace"))

    def _read_cache(self, path: Path, url: str) -> _Entry | None:
        try:
            with path.open("rb") as f:
                meta = json.loads(f.readline(64 * 1024))
                body = f.read(self.max_bytes + 1)
            ok = (
                meta["url"] == url
                and meta["variant"] in VARIANTS
                and hashlib.sha256(body).hexdigest() == meta["sha256"]
            )
            if not ok:
                return None
            return _Entry(
                str(meta["variant"]),
                str(meta["etag"]),
                str(meta["last_modified"]),
                float(meta["fetched_at"]),
                body,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent or damaged: fetch as if there were none

    def _write_cache(self, path: Path, url: str, entry: _Entry) -> None:
        meta = {
            "url": url,
            "variant": entry.variant,
            "etag": entry.etag,
            "last_modified": entry.last_modified,
            "fetched_at": entry.fetched_at,
            "sha256": hashlib.sha256(entry.body).hexdigest(),
        }
        # A cache that cannot be written costs only a re-download next run.
        with contextlib.suppress(OSError):
            self.cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.cache_dir, 0o700)
            fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-")  # mode 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(json.dumps(meta).encode() + b"\n")
                    f.write(entry.body)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
