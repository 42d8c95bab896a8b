"""Download a folder's signed indexes and the .debs the fleet needs into the mirror.

The indexes (InRelease, Release, Release.gpg, Packages*) are kept byte for byte as NVIDIA
serves them, so hosts' apt checks the signature and every hash as usual; each Packages file
is checked against the InRelease's SHA256 list before it is used, and each .deb against the
Packages' SHA256 before it is kept. A run downloads only what changed: an index the server
says is not modified (If-Modified-Since, the file's mtime) and a .deb whose SHA256 already
matches are kept. New indexes replace the old ones only once every .deb they name is in
place, so a host reading the mirror mid-run sees the old, whole state.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import http.client
import os
import posixpath
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpunode import __version__
from gpunode.mirror import condachan, condasolve, wheels
from gpunode.mirror.condachan import CondaSet
from gpunode.mirror.files import read_manifest, write_manifest
from gpunode.mirror.needs import Download, Folder
from gpunode.mirror.wheels import PipSet
from gpunode.repoindex import PackageVersion, parse_packages
from gpunode.repoindex.decompress import BadData, TooLarge, decompress
from gpunode.repoindex.opener import safe_opener

INDEXES = ("InRelease", "Release", "Release.gpg", "Packages", "Packages.gz", "Packages.xz")
MAX_INDEX = 256 * 1024 * 1024
MAX_REPODATA = 1024**3  # conda-forge's linux-64/repodata.json is some hundreds of MB
MAX_FILE = 4 * 1024**3  # a file the index does not size (the Miniconda installer)
TIMEOUT = 30.0
_CHUNK = 1024 * 1024


class MirrorError(Exception):
    """The mirror cannot be brought up to date; the message says which file and why."""


@dataclass
class Report:
    downloaded: list[str] = field(default_factory=list)  # paths under the root
    kept: list[str] = field(default_factory=list)
    bytes: int = 0


Say = Callable[[str], None]


def build(
    folders: Iterable[Folder],
    root: Path,
    say: Say = lambda _: None,
    files: Iterable[Download] = (),
    keys: Mapping[str, str] | None = None,
    pip: Iterable[PipSet] = (),
    conda: Iterable[CondaSet] = (),
) -> Report:
    """Bring each folder's part of the mirror under `root` up to date, `files` (the
    Miniconda installer), each checked against its pinned SHA256, `keys` (rel -> URL: a
    repository's signing key, which the hosts check by its fingerprint) and the wheels of
    the `pip` installs, in simple indexes."""
    report = Report()
    opener = safe_opener()
    conda = list(conda)
    if conda:  # before any download: the envs' packages need conda's solver
        try:
            condasolve.require()
        except condasolve.SolverMissing as e:
            raise MirrorError(f"conda: {e}") from None
    for rel, url in sorted((keys or {}).items()):
        new = _index(opener, url, root / rel, report, say)
        if new is _ABSENT:
            raise MirrorError(f"{url}: HTTP 404: the repository has no signing key there")
        if new is not None:
            os.replace(new, root / rel)
    for folder in folders:
        _folder(opener, folder, root, report, say)
    for f in files:
        _file(opener, f.url, root / f.rel, f.sha256, MAX_FILE, report, say, f.whose)
        _hold(root / f.rel, f.sha256)
    _channels(opener, conda, root, report, say)
    try:
        downloaded, kept = wheels.fetch(pip, root, say)
    except wheels.WheelError as e:
        raise MirrorError(str(e)) from None
    report.downloaded += [str(p) for p in downloaded]
    report.kept += [str(p) for p in kept]
    report.bytes += sum(p.stat().st_size for p in downloaded)
    return report


def _channels(
    opener: urllib.request.OpenerDirector,
    sets: Iterable[CondaSet],
    root: Path,
    report: Report,
    say: Say,
) -> None:
    """The envs' conda packages in local channels (gpunode.mirror.condachan)."""

    def index(url: str, path: Path) -> None:
        new = _index(opener, url, path, report, say, MAX_REPODATA)
        if new is not None and new is not _ABSENT:
            os.replace(new, path)

    def download(url: str, path: Path, sha256: str, size: int) -> None:
        _file(opener, url, path, sha256, size, report, say, "the channel's repodata")

    try:
        condachan.fetch(sets, root, index, download)
    except ValueError as e:
        raise MirrorError(f"conda: {e}") from None


def _folder(
    opener: urllib.request.OpenerDirector, folder: Folder, root: Path, report: Report, say: Say
) -> None:
    dest = root / folder.rel
    dest.mkdir(parents=True, exist_ok=True)
    staged: dict[str, Path | None] = {}  # index name -> new copy (None: upstream has none)
    try:
        for name in INDEXES:
            staged[name] = _index(opener, folder.url + name, dest / name, report, say)
        packages = _packages(dest, staged)
        wanted = [_stanza(packages, folder, n, v) for n, v in sorted(folder.packages)]
        held: dict[str, str] = {}
        for pv in wanted:
            _deb(opener, folder, dest, pv, report, say)
            held[pv.filename] = pv.sha256
        for name, new in staged.items():  # the new indexes, once every .deb is in place
            if new is _ABSENT:  # one the repository no longer has would not match its Release
                with contextlib.suppress(FileNotFoundError):
                    (dest / name).unlink()
            elif new is not None:
                os.replace(new, dest / name)
        staged.clear()
        _manifest(dest, packages, held)
    finally:
        for new in staged.values():
            if new is not None and new is not _ABSENT:
                with contextlib.suppress(FileNotFoundError):
                    new.unlink()


_ABSENT = Path("/nonexistent/absent-upstream")  # staged marker: the server has no such file


def _index(
    opener: urllib.request.OpenerDirector,
    url: str,
    have: Path,
    report: Report,
    say: Say,
    limit: int = MAX_INDEX,
) -> Path | None:
    """A new copy of the index at `url` beside `have`; None when `have` is current;
    _ABSENT when the server has no such file."""
    headers = {"User-Agent": f"gpunode/{__version__}", "Accept-Encoding": "identity"}
    if have.exists():
        headers["If-Modified-Since"] = email.utils.formatdate(have.stat().st_mtime, usegmt=True)
    try:
        resp = opener.open(urllib.request.Request(url, headers=headers), timeout=TIMEOUT)
    except urllib.error.HTTPError as e:
        e.close()
        if e.code == 304:
            report.kept.append(str(have))
            return None
        if e.code in (404, 410):
            return _ABSENT
        raise MirrorError(f"{url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
        raise MirrorError(f"{url}: {getattr(e, 'reason', e)}") from None
    with resp:
        new, _ = _save(resp, have, url, limit)
        modified = resp.headers.get("Last-Modified", "")
    stamp = email.utils.parsedate_to_datetime(modified).timestamp() if modified else None
    if stamp is not None:
        os.utime(new, (stamp, stamp))
    report.downloaded.append(str(have))
    report.bytes += new.stat().st_size
    say(f"fetched {url}")
    return new


def _save(resp: http.client.HTTPResponse, beside: Path, url: str, limit: int) -> tuple[Path, str]:
    """The body in a new file beside `beside` (not yet in its place), and its sha256."""
    beside.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=beside.parent, prefix=".part-")
    digest, total = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as f:
            while chunk := resp.read(_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise MirrorError(f"{url}: more than the {limit} bytes expected")
                digest.update(chunk)
                f.write(chunk)
        os.chmod(tmp, 0o644)  # served to every host
    except (OSError, http.client.HTTPException) as e:
        os.unlink(tmp)
        raise MirrorError(f"{url}: {e}") from None
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp), digest.hexdigest()


def _current(dest: Path, staged: dict[str, Path | None], name: str) -> Path | None:
    new = staged.get(name)
    if new is _ABSENT:
        return None
    if new is not None:
        return new
    return dest / name if (dest / name).exists() else None


def _signed_hashes(dest: Path, staged: dict[str, Path | None]) -> dict[str, str]:
    """name -> SHA256 from the (In)Release's SHA256 list."""
    release = _current(dest, staged, "InRelease") or _current(dest, staged, "Release")
    if release is None:
        raise MirrorError(f"{dest}: the repository has neither InRelease nor Release")
    out: dict[str, str] = {}
    section = False
    for line in release.read_text(errors="replace").splitlines():
        if line and not line[0].isspace():
            section = line.strip() == "SHA256:"
            continue
        words = line.split()
        if section and len(words) == 3:
            out[words[2]] = words[0]
    return out


def _packages(dest: Path, staged: dict[str, Path | None]) -> list[PackageVersion]:
    """The folder's Packages index as the signed Release lists it, parsed."""
    signed = _signed_hashes(dest, staged)
    parsed: list[PackageVersion] | None = None
    for name in ("Packages", "Packages.gz", "Packages.xz"):
        path = _current(dest, staged, name)
        if path is None:
            continue
        body = path.read_bytes()
        if signed.get(name) != hashlib.sha256(body).hexdigest():
            raise MirrorError(
                f"{name} does not match the SHA256 its Release lists (the repository is"
                " mid-sync?): run gpunode mirror again later"
            )
        if parsed is None:
            try:
                text = decompress(name, body, MAX_INDEX)
            except (BadData, TooLarge) as e:
                raise MirrorError(f"{name}: {e}") from None
            index = parse_packages(text.decode("utf-8", errors="replace"))
            parsed = [v for n in index.names() for v in index.versions(n, "amd64")]
    if parsed is None:
        raise MirrorError(f"{dest}: the repository has no Packages index")
    return parsed


def _stanza(
    packages: list[PackageVersion], folder: Folder, name: str, version: str
) -> PackageVersion:
    for pv in packages:
        if pv.name == name and pv.version == version and pv.filename and pv.sha256:
            return pv
    raise MirrorError(f"{folder.url}: the index has no file of {name} {version} (mid-sync?)")


def _deb(
    opener: urllib.request.OpenerDirector,
    folder: Folder,
    dest: Path,
    pv: PackageVersion,
    report: Report,
    say: Say,
) -> None:
    rel = posixpath.normpath(pv.filename)
    if rel.startswith(("/", "..")) or "/../" in f"/{rel}/":
        raise MirrorError(f"{folder.url}: the index names a file outside its folder: {pv.filename}")
    size = pv.size if pv.size is not None else MAX_INDEX
    _file(opener, folder.url + rel, dest / rel, pv.sha256, size, report, say, "the index")


def _file(
    opener: urllib.request.OpenerDirector,
    url: str,
    path: Path,
    sha256: str,
    limit: int,
    report: Report,
    say: Say,
    whose: str,
) -> None:
    """`path` with the SHA256 `whose` gives: kept if it has it, else downloaded from `url`."""
    if path.is_file() and _sha256(path) == sha256:
        report.kept.append(str(path))
        return
    headers = {"User-Agent": f"gpunode/{__version__}", "Accept-Encoding": "identity"}
    try:
        resp = opener.open(urllib.request.Request(url, headers=headers), timeout=TIMEOUT)
    except urllib.error.HTTPError as e:
        e.close()
        raise MirrorError(f"{url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
        raise MirrorError(f"{url}: {getattr(e, 'reason', e)}") from None
    with resp:
        new, digest = _save(resp, path, url, limit)
    if digest != sha256:
        new.unlink()
        raise MirrorError(f"{url}: SHA256 {digest}, {whose} says {sha256}: not kept")
    os.replace(new, path)
    report.downloaded.append(str(path))
    report.bytes += path.stat().st_size
    say(f"fetched {url}")


def _hold(path: Path, sha256: str) -> None:
    """`path` in its folder's manifest, which plan checks the installer's pin against."""
    held = {n: s for n, s in read_manifest(path.parent).items() if (path.parent / n).is_file()}
    held[path.name] = sha256
    write_manifest(path.parent, held)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _manifest(dest: Path, packages: list[PackageVersion], held: dict[str, str]) -> None:
    """What the folder holds, for the planner: this run's files, and an earlier run's that
    the index still names at the same SHA256 and are still there."""
    current = {pv.filename: pv.sha256 for pv in packages}
    for name, sha in read_manifest(dest).items():
        if current.get(name) == sha and (dest / posixpath.normpath(name)).is_file():
            held.setdefault(name, sha)
    write_manifest(dest, held)
