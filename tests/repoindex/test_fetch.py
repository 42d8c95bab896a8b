"""IndexCache against a real HTTP server on 127.0.0.1 that counts what it is asked."""

from __future__ import annotations

import gzip
import lzma
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from gpunode.repoindex import (
    FETCHED,
    NOT_MODIFIED,
    STALE,
    FetchedIndex,
    IndexCache,
    IndexUnavailable,
    default_cache_dir,
    normalize_repo_url,
)
from tests.conftest import until
from tests.repoindex.conftest import FIX, REPO_PATH, Repo

PACKAGES = (FIX / "Packages-ubuntu2204-x86_64").read_bytes()
XZ, GZ, PLAIN = REPO_PATH + "Packages.xz", REPO_PATH + "Packages.gz", REPO_PATH + "Packages"


def serve(repo: Repo, body: bytes = PACKAGES, variants: tuple[str, ...] = ("xz", "gz", "")) -> None:
    if "xz" in variants:
        repo.put("Packages.xz", lzma.compress(body))
    if "gz" in variants:
        repo.put("Packages.gz", gzip.compress(body, mtime=0))
    if "" in variants:
        repo.put("Packages", body)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens once the socket is closed


def test_prefers_xz(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    got = IndexCache(tmp_path).get(repo.url)
    assert got.source == FETCHED and not got.stale and got.error == ""
    assert got.index_url == repo.url + "Packages.xz" and got.repo_url == repo.url
    assert got.index.version_strings("libcudnn9-cuda-12")[-1] == "9.14.0.64-1"
    assert dict(repo.counts) == {XZ: 1}


@pytest.mark.parametrize(("variants", "used"), [(("gz", ""), "Packages.gz"), (("",), "Packages")])
def test_falls_back_when_xz_missing(
    repo: Repo, tmp_path: Path, variants: tuple[str, ...], used: str
) -> None:
    serve(repo, variants=variants)
    got = IndexCache(tmp_path).get(repo.url.rstrip("/"))  # the trailing slash is optional
    assert got.index_url == repo.url + used
    assert got.index.version_strings("cuda-toolkit-12-8") == ("12.8.0-1", "12.8.1-1")
    assert repo.counts[XZ] == 1 and repo.counts[REPO_PATH + used] == 1


def test_many_threads_one_fetch(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    repo.hold = threading.Event()  # keep the first request in flight while the rest arrive
    cache = IndexCache(tmp_path)
    results: list[FetchedIndex] = []
    started = threading.Barrier(20)

    def host() -> None:
        started.wait()
        results.append(cache.get(repo.url))

    threads = [threading.Thread(target=host) for _ in range(20)]
    for t in threads:
        t.start()
    until(lambda: repo.counts[XZ] == 1, timeout=10, what="the first request reached the server")
    repo.hold.set()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 20
    assert all(r is results[0] for r in results)
    assert dict(repo.counts) == {XZ: 1}
    cache.get(repo.url)  # later callers in the same run reuse it too
    assert dict(repo.counts) == {XZ: 1}


def test_second_run_sends_validators_and_uses_cache_on_304(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    first = IndexCache(tmp_path).get(repo.url)
    etag = repo.files[XZ].etag
    assert repo.headers_of(XZ)[0].get("if-none-match") is None

    second = IndexCache(tmp_path).get(repo.url)
    sent = repo.headers_of(XZ)[1]
    assert sent["if-none-match"] == etag
    assert sent["if-modified-since"] == "Tue, 14 Nov 2023 22:13:20 GMT"
    assert second.source == NOT_MODIFIED
    assert second.fetched_at == first.fetched_at
    assert second.index.names() == first.index.names()
    assert repo.counts[XZ] == 2 and repo.counts[GZ] == 0


def test_last_modified_alone_gives_304(repo: Repo, tmp_path: Path) -> None:
    repo.put("Packages.gz", gzip.compress(PACKAGES), etag=None)
    IndexCache(tmp_path).get(repo.url)
    second = IndexCache(tmp_path).get(repo.url)
    assert second.source == NOT_MODIFIED
    sent = repo.headers_of(GZ)[1]
    assert "if-none-match" not in sent and "if-modified-since" in sent
    # The remembered Packages.gz is asked for first: no second 404 for Packages.xz.
    assert repo.counts[XZ] == 1 and repo.counts[GZ] == 2


def test_changed_index_is_fetched_again(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    IndexCache(tmp_path).get(repo.url)
    newer = (
        PACKAGES
        + b"\nPackage: nvidia-open-550\nVersion: 550.180.01-0ubuntu1\nArchitecture: amd64\n"
    )
    serve(repo, newer)  # a new ETag
    got = IndexCache(tmp_path).get(repo.url)
    assert got.source == FETCHED
    assert got.index.version_strings("nvidia-open-550")[-1] == "550.180.01-0ubuntu1"
    third = IndexCache(tmp_path).get(repo.url)
    assert third.source == NOT_MODIFIED
    assert third.index.version_strings("nvidia-open-550")[-1] == "550.180.01-0ubuntu1"


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/cuda/repos/ubuntu2204/x86_64/"
    with pytest.raises(IndexUnavailable) as e:
        IndexCache(tmp_path).get(url, allow_stale=True)  # nothing cached: nothing stale to use
    assert str(e.value) == f"{url}Packages.xz: connection refused"
    assert e.value.url == url + "Packages.xz" and not e.value.stale_available


def test_stale_copy_only_when_asked(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    fresh = IndexCache(tmp_path).get(repo.url)
    repo.close()  # the server goes away between runs
    cache = IndexCache(tmp_path)
    with pytest.raises(IndexUnavailable) as e:
        cache.get(repo.url)
    assert e.value.stale_available
    assert str(e.value).startswith(f"{repo.url}Packages.xz: connection refused (a cached copy")
    assert str(e.value).endswith("exists; allow_stale=True uses it)")
    stale = cache.get(repo.url, allow_stale=True)
    assert stale.source == STALE and stale.stale
    assert stale.error == f"{repo.url}Packages.xz: connection refused"
    assert stale.fetched_at == fresh.fetched_at
    assert stale.index.names() == fresh.index.names()


def test_failure_is_remembered_for_the_run(repo: Repo, tmp_path: Path) -> None:
    repo.statuses[XZ] = 503
    cache = IndexCache(tmp_path)
    for _ in range(3):
        with pytest.raises(IndexUnavailable, match=r"Packages\.xz: HTTP 503 Service Unavailable$"):
            cache.get(repo.url)
    assert dict(repo.counts) == {XZ: 1}  # a server error is not a missing file: no .gz try


def test_no_index_at_all_lists_each_attempt(repo: Repo, tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailable) as e:
        IndexCache(tmp_path).get(repo.url)
    assert str(e.value) == (
        f"{repo.url}: no usable index: Packages.xz: HTTP 404 Not Found; "
        "Packages.gz: HTTP 404 Not Found; Packages: HTTP 404 Not Found"
    )


def test_timeout(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    repo.hold = threading.Event()
    with pytest.raises(IndexUnavailable, match=r"Packages\.xz: timed out after 0\.5 s$"):
        IndexCache(tmp_path, timeout=0.5).get(repo.url)


def test_slow_drip_hits_total_timeout(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    repo.drip.add(XZ)
    with pytest.raises(IndexUnavailable, match=r"Packages\.xz: download took over 0\.5 s$"):
        IndexCache(tmp_path, timeout=5, total_timeout=0.5, max_bytes=10**10).get(repo.url)


def test_oversize_body_refused(repo: Repo, tmp_path: Path) -> None:
    repo.put("Packages.xz", os.urandom(5000))
    with pytest.raises(
        IndexUnavailable, match=r"Packages\.xz: body of 5000 bytes is over the 4096 byte limit$"
    ):
        IndexCache(tmp_path, max_bytes=4096).get(repo.url)


def test_oversize_without_content_length_refused(repo: Repo, tmp_path: Path) -> None:
    repo.put("Packages.xz", os.urandom(5000))
    repo.no_length.add(XZ)  # so the limit must hold while reading
    with pytest.raises(IndexUnavailable, match=r"Packages\.xz: body is over the 4096 byte limit$"):
        IndexCache(tmp_path, max_bytes=4096).get(repo.url)


def test_body_cut_short_is_an_error(repo: Repo, tmp_path: Path) -> None:
    serve(repo, variants=("",))
    repo.short.add(PLAIN)  # a plain index cut short would still parse: it must not be used
    with pytest.raises(IndexUnavailable) as e:
        IndexCache(tmp_path).get(repo.url)
    n = len(PACKAGES)
    assert str(e.value).endswith(f"Packages: connection closed after {n} of {n + 100} bytes")
    assert not list(tmp_path.iterdir())


def test_decompression_bomb_refused(repo: Repo, tmp_path: Path) -> None:
    repo.put("Packages.xz", lzma.compress(b"\0" * (8 << 20)))  # ~1 KiB that unpacks to 8 MiB
    with pytest.raises(
        IndexUnavailable, match=r"decompressed index is over the 1048576 byte limit"
    ):
        IndexCache(tmp_path, max_bytes=1 << 20).get(repo.url)
    assert repo.counts[GZ] == 0  # too large is final, not a reason to try the next file


def test_bad_xz_falls_back_to_gz(repo: Repo, tmp_path: Path) -> None:
    serve(repo, variants=("gz",))
    repo.put("Packages.xz", b"this is not xz")
    got = IndexCache(tmp_path).get(repo.url)
    assert got.index_url.endswith("Packages.gz")


def test_bad_compression_reported(repo: Repo, tmp_path: Path) -> None:
    repo.put("Packages.xz", lzma.compress(PACKAGES)[:-40])  # cut short
    repo.put("Packages.gz", b"\x1f\x8b garbage")
    with pytest.raises(IndexUnavailable) as e:
        IndexCache(tmp_path).get(repo.url)
    msg = str(e.value)
    assert "Packages.xz: truncated xz data" in msg or "Packages.xz: bad xz data" in msg
    assert "Packages.gz: bad gzip data" in msg and "Packages: HTTP 404" in msg


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/Packages.xz"])
def test_redirect_to_other_scheme_refused(repo: Repo, tmp_path: Path, target: str) -> None:
    repo.redirects[XZ] = target
    serve(repo, variants=("gz",))
    with pytest.raises(IndexUnavailable) as e:
        IndexCache(tmp_path).get(repo.url)
    assert str(e.value) == (
        f"{repo.url}Packages.xz: redirect to {target} refused: only http and https are followed"
    )
    assert repo.counts[GZ] == 0


def test_http_redirect_followed(repo: Repo, tmp_path: Path) -> None:
    repo.put("mirror/Packages.xz", lzma.compress(PACKAGES))
    repo.redirects[XZ] = repo.url + "mirror/Packages.xz"
    got = IndexCache(tmp_path).get(repo.url)
    assert got.source == FETCHED and "libnccl2" in got.index
    assert repo.counts[REPO_PATH + "mirror/Packages.xz"] == 1


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("file:///srv/repo/", "only http and https URLs are supported"),
        ("ftp://mirror.example/cuda/", "only http and https URLs are supported"),
        ("http:///no-host/", "only http and https URLs are supported"),
        ("http://user:secret@mirror.example/cuda/", "credentials in the URL are not supported"),
        ("http://mirror.example:99999/cuda/", "invalid port"),
    ],
)
def test_refused_urls(tmp_path: Path, url: str, why: str) -> None:
    with pytest.raises(IndexUnavailable, match=why) as e:
        IndexCache(tmp_path).get(url)
    assert "secret" not in str(e.value)
    assert not list(tmp_path.iterdir())


def test_normalize_repo_url() -> None:
    assert normalize_repo_url("HTTPS://h.example/a/b") == "https://h.example/a/b/"
    assert normalize_repo_url(" http://h.example:8080/x/ ") == "http://h.example:8080/x/"


def test_cache_files_private_atomic_and_keyed_by_hash(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    cache_dir = tmp_path / "deep" / "repoindex"
    cache = IndexCache(cache_dir)
    cache.get(repo.url)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    files = list(cache_dir.iterdir())
    assert files == [cache.cache_path(repo.url)]  # no temp files left behind
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert len(files[0].stem) == 64 and "127.0.0.1" not in files[0].name


def test_damaged_cache_is_ignored(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    cache = IndexCache(tmp_path)
    cache.get(repo.url)
    path = cache.cache_path(repo.url)
    path.write_bytes(path.read_bytes()[:-10])  # body no longer matches its checksum
    got = IndexCache(tmp_path).get(repo.url)
    assert got.source == FETCHED
    assert "if-none-match" not in repo.headers_of(XZ)[1]


def test_unwritable_cache_still_returns_the_index(repo: Repo, tmp_path: Path) -> None:
    serve(repo)
    blocker = tmp_path / "file"
    blocker.write_text("")
    got = IndexCache(blocker / "repoindex").get(repo.url)  # a file where a folder should be
    assert got.source == FETCHED


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUNODE_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "repoindex"
    assert IndexCache().cache_dir == tmp_path / "repoindex"
    assert IndexCache(tmp_path / "x").cache_dir == tmp_path / "x"
    monkeypatch.delenv("GPUNODE_CACHE_DIR")
    from platformdirs import user_cache_dir

    assert default_cache_dir() == Path(user_cache_dir("gpunode")) / "repoindex"
