"""The wheels the envs' pip installs take, in PEP 503 simple indexes inside the mirror.

pip itself resolves: `pip download` (for the env's Python and the host's platform, wheels
only) fetches each step's packages at the plan's exact versions and their dependencies into
a folder per index, checking every file against the hash its index link gives, and leaving
a file already there alone (a second run asks the index pages only). A dry-run `pip install`
of the same requirements against that folder alone then reports, in pip's JSON installation
report, exactly which files the step takes; those are listed, with their sha256, in the
mirror's `<index>/<project>/index.html`, so the hosts' pip checks each file's hash as well.
"""

from __future__ import annotations

import contextlib
import html
import json
import posixpath
import re
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpunode.mirror.files import write_atomic, write_manifest
from gpunode.plan.mirrorcheck import pep503_name
from gpunode.roles.ops.fetch import pip_trusted

STORE = "wheels"  # wheels/<index>/<file>: the files, one flat folder per index
MANIFEST = "gpunode-wheels.json"  # {index: {file: sha256}}: what the pages list
# the glibc of each Ubuntu release, for pip's manylinux platform tag (manylinux_2_35 also
# takes the older manylinux wheels); an unknown release gets the oldest of these
GLIBC = {"ubuntu2004": "2_31", "ubuntu2204": "2_35", "ubuntu2404": "2_39"}
TIMEOUT = 3600.0  # one pip run: a step's wheels (torch's CUDA wheels: gigabytes)
_INDEX = re.compile(r"\A(simple|pytorch(/[A-Za-z0-9._-]+)+)\Z")


class WheelError(Exception):
    """pip could not fetch or resolve a step's wheels; the message says which and why."""


@dataclass(frozen=True)
class PipSet:
    """One pip step of a plan: what it installs, from where, for which interpreter."""

    index: str  # the mirror's index folder: "simple", "pytorch/cu128"
    index_url: str | None  # upstream; None: pip's default (PyPI)
    extra_index_url: str | None
    specs: tuple[str, ...]  # name[extras]==version, as the plan asks
    python: str | None  # the env's Python series: "3.11"
    platform: str  # manylinux_2_35_x86_64

    def __post_init__(self) -> None:
        if not _INDEX.match(self.index) or "/.." in self.index:
            raise ValueError(f"not a mirror index folder: {self.index!r}")


def platform_tag(repo_slug: str) -> str:
    return f"manylinux_{GLIBC.get(repo_slug, min(GLIBC.values()))}_x86_64"


def _target(s: PipSet) -> list[str]:
    """pip's options choosing wheels for the host's interpreter, not this machine's."""
    out = ["--only-binary=:all:", "--platform", s.platform, "--implementation", "cp"]
    # PyTorch's own index tags many CUDA wheels plain linux_x86_64 (torch 2.4.1+cu124)
    out += ["--platform", "linux_x86_64"]
    if s.python:
        out += ["--python-version", s.python]
    return out


def _sources(s: PipSet) -> list[str]:
    out: list[str] = []
    for option, url in (("--index-url", s.index_url), ("--extra-index-url", s.extra_index_url)):
        if url:
            out += [option, url]
    # an http URL is there only when the inventory allowed it (repos.insecure_http)
    urls = (s.index_url, s.extra_index_url)
    for host in pip_trusted(urls, insecure_http=True):
        out += ["--trusted-host", host]
    return out


def _pip(args: Sequence[str], what: str) -> None:
    # --isolated: this machine's pip.conf (its own extra indexes) does not choose the files
    cmd = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check"]
    cmd += ["--no-input", "-q", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WheelError(f"{what}: pip did not run: {e}") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()][-3:]
        if "No module named pip" in proc.stderr:
            lines = [f"pip is not installed for {sys.executable}"]
        raise WheelError(f"{what}: " + " / ".join(lines or [f"pip exit {proc.returncode}"]))


def _taken(s: PipSet, folder: Path) -> dict[str, str]:
    """file -> sha256 of the wheels pip takes for `s` from `folder` alone (its report)."""
    with tempfile.TemporaryDirectory(prefix="gpunode-pip-") as tmp:
        report = Path(tmp) / "report.json"
        args = ["install", "--dry-run", "--ignore-installed", "--no-index", "--find-links"]
        args += [str(folder), "--report", str(report), "--target", str(Path(tmp) / "t")]
        _pip([*args, *_target(s), *s.specs], f"resolving {' '.join(s.specs)} in {folder}")
        items = json.loads(report.read_text()).get("install", [])
    out: dict[str, str] = {}
    for item in items:
        info = item.get("download_info", {})
        path = Path(urllib.parse.unquote(urllib.parse.urlsplit(info.get("url", "")).path))
        sha = info.get("archive_info", {}).get("hashes", {}).get("sha256", "")
        if path.parent != folder or not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise WheelError(f"pip's report names {path}, not a file of {folder} with a sha256")
        out[path.name] = sha
    return out


def fetch(
    sets: Iterable[PipSet], root: Path, say: Callable[[str], None]
) -> tuple[list[Path], list[Path]]:
    """Each set's wheels in the mirror under `root` and the index pages listing them:
    (files downloaded, files already there)."""
    sets = list(sets)
    if not sets:
        return [], []  # no pip installs: an earlier run's indexes stay as they are
    held = _held(root)
    downloaded: list[Path] = []
    kept: list[Path] = []
    for s in sets:
        folder = root / STORE / s.index
        folder.mkdir(parents=True, exist_ok=True)
        before = {p.name for p in folder.iterdir()}
        what = f"{' '.join(s.specs)} from {s.index_url or 'PyPI'}"
        _pip(["download", "-d", str(folder), *_sources(s), *_target(s), *s.specs], what)
        for name, sha in _taken(s, folder).items():
            (kept if name in before else downloaded).append(folder / name)
            if name not in before:
                say(f"fetched {name} ({s.index_url or 'PyPI'})")
            held.setdefault(s.index, {})[name] = sha
    _pages(root, held)
    return downloaded, kept


def _held(root: Path) -> dict[str, dict[str, str]]:
    """An earlier run's listing, of the files still there (another pin may want them)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        before = json.loads((root / MANIFEST).read_text())
        return {
            index: {f: sha for f, sha in files.items() if (root / STORE / index / f).is_file()}
            for index, files in before.items()
            if _INDEX.match(index) and isinstance(files, dict)
        }
    return {}


def _project(filename: str) -> str:
    """PEP 503's normalized project name of a wheel's file name."""
    return pep503_name(filename.split("-", 1)[0])


def _pages(root: Path, held: dict[str, dict[str, str]]) -> None:
    """<index>/<project>/index.html with each file's link and sha256, <index>/index.html."""
    for index, files in held.items():
        projects: dict[str, list[str]] = {}
        for name in sorted(files):
            projects.setdefault(_project(name), []).append(name)
        for project, names in projects.items():
            here = f"{index}/{project}"
            links = [
                f'<a href="{html.escape(posixpath.relpath(f"{STORE}/{index}/{n}", here))}'
                f'#sha256={files[n]}">{html.escape(n)}</a><br/>'
                for n in names
            ]
            write_atomic(root / here / "index.html", _page(f"Links for {project}", links))
        listing = [f'<a href="{p}/">{p}</a><br/>' for p in sorted(projects)]
        write_atomic(root / index / "index.html", _page("Simple index", listing))
        # what plan checks a pip install's packages against (gpunode.plan.mirrorcheck)
        write_manifest(root / index, files)
    write_atomic(root / MANIFEST, json.dumps(held, indent=1, sort_keys=True))


def _page(title: str, body: list[str]) -> str:
    return (
        f"<!DOCTYPE html>\n<html><head><title>{html.escape(title)}</title></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
