"""Build the lab's package repository: signed apt folders, a pip index, a conda installer.

Layout under the returned root (served over HTTP at base_url):
  ubuntu2204/x86_64/, ubuntu2404/x86_64/  flat apt repositories, like NVIDIA's network repo
  ubuntu/dists/<codename>-updates/         Ubuntu's archive for its own NVIDIA packages
  pip/simple/, pip/cu124/, ...             PEP 503 indexes of stand-in wheels
  conda/Miniconda3-latest-Linux-x86_64.sh  a stand-in Miniconda installer
  pkgs/main/                               a stand-in conda channel (Python and its needs)
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from email.utils import formatdate
from importlib import resources
from pathlib import Path

from gpunode_lab.repo import (
    catalog,
    catalog_container,
    conda,
    conda_channel,
    nvidia_repo,
    pypi,
    ubuntu_archive,
)
from gpunode_lab.repo.deb import Package, control_text, deb_bytes
from gpunode_lab.repo.signing import Signer
from gpunode_lab.state import MIRRORS

GENERATOR = "gpunode-lab-repo/1"


def generator_version() -> str:
    """Changes whenever the generator's code or the lab's repository data change."""
    h = hashlib.sha256(GENERATOR.encode())
    here = resources.files("gpunode_lab.repo")
    code = [p.name for p in here.iterdir() if p.name.endswith(".py")]
    data = [nvidia_repo.DATA_FILE, ubuntu_archive.DATA_FILE, catalog_container.DATA_FILE]
    for name in sorted([*code, *data, "dkms_standin.sh"]):
        h.update((here / name).read_bytes())
    for name in ("q.txt", "q.xml"):
        h.update((here / "smi_templates" / name).read_bytes())
    return h.hexdigest()[:16]


@contextmanager
def _locked(dest: Path) -> Iterator[None]:
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_repository(dest: Path, base_url: str, mirror: str = "full") -> Path:
    """Build (or reuse) the repository in `dest`; return the folder to serve at base_url.

    Each mirror kind (full, lagging) has its own cached tree; they share the signing key.
    """
    if mirror not in MIRRORS:
        raise ValueError(f"unknown mirror {mirror!r}; one of {', '.join(MIRRORS)}")
    dest = Path(dest)
    stamp = f"{generator_version()} {base_url.rstrip('/')} {mirror}\n"
    root = dest / ("www" if mirror == "full" else f"www-{mirror}")
    with _locked(dest):
        stamp_file = dest / ("stamp" if mirror == "full" else f"stamp-{mirror}")
        if root.is_dir() and stamp_file.exists() and stamp_file.read_text() == stamp:
            return root
        work = dest / f"www.tmp-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        with Signer(dest / "key") as signer:
            keyring = signer.public_keyring()
            _build_apt(work, base_url.rstrip("/"), keyring, signer, mirror)
        with Signer(dest / "ubuntu-key") as signer:  # Ubuntu's archive has a key of its own
            ubuntu_archive.build(work, signer, signer.public_keyring())
        with Signer(dest / "key-container") as signer:
            _build_container_repo(work / catalog_container.FOLDER, signer)
        pypi.build_index(work / "pip")
        conda.write_installer(work / "conda")
        conda_channel.build(work)
        (work / "README.txt").write_text(README)
        stamp_file.unlink(missing_ok=True)
        old = dest / f"www.old-{os.getpid()}"
        if root.exists():
            root.rename(old)
        work.rename(root)
        shutil.rmtree(old, ignore_errors=True)
        stamp_file.write_text(stamp)
    return root


README = """\
gpunode lab package repository (stand-ins).

This tree imitates NVIDIA's CUDA network repository, the PyTorch wheel index and the
Miniconda installer for gpunode's simulated lab. Every package here is a tiny stand-in
with real names, versions and dependency shapes; none contains NVIDIA software.
"""


def _build_apt(work: Path, base_url: str, keyring: bytes, signer: Signer, mirror: str) -> None:
    per_distro = {d: catalog.packages_for(d, mirror) for d in catalog.DISTROS}
    unique: dict[str, Package] = {}
    for pkgs in per_distro.values():
        for p in pkgs:
            unique.setdefault(p.filename, p)
    pool = work / ".pool"
    pool.mkdir()

    def write(p: Package) -> tuple[str, bytes]:
        data = deb_bytes(p)
        (pool / p.filename).write_bytes(data)
        return p.filename, data

    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 2)) as ex:
        blobs = dict(ex.map(write, unique.values()))
    for distro, pkgs in per_distro.items():
        folder = work / distro / "x86_64"
        folder.mkdir(parents=True)
        entries = []
        for p in sorted(pkgs, key=lambda p: (p.name, p.filename)):
            os.link(pool / p.filename, folder / p.filename)
            entries.append(_index_entry(p, blobs[p.filename]))
        kr = catalog.keyring_package(distro, base_url, keyring)
        data = deb_bytes(kr)
        (folder / kr.filename).write_bytes(data)
        entries.append(_index_entry(kr, data))
        _write_indexes(folder, entries)
        signer.sign_release(folder)
    shutil.rmtree(pool)


def _build_container_repo(root: Path, signer: Signer) -> None:
    """libnvidia-container/: `gpgkey` (armoured, as NVIDIA serves it), its fingerprint for
    the lab's inventory, and the flat folder stable/deb/amd64/."""
    folder = root / "stable" / "deb" / "amd64"
    folder.mkdir(parents=True)
    (root / "gpgkey").write_bytes(signer.public_key_armored())
    (root / "gpgkey.fingerprint").write_text(signer.fingerprint() + "\n")
    entries = []
    for p in catalog_container.container_packages():
        data = deb_bytes(p)
        (folder / p.filename).write_bytes(data)
        entries.append(_index_entry(p, data))
    _write_indexes(folder, entries, label="NVIDIA libnvidia-container (gpunode lab stand-in)")
    signer.sign_release(folder)


def _index_entry(p: Package, data: bytes) -> str:
    fields = p.control_fields()
    desc = fields.pop()  # Description last, after the file's checksums
    fields += [
        ("Filename", f"./{p.filename}"),
        ("Size", str(len(data))),
        ("MD5sum", hashlib.md5(data).hexdigest()),
        ("SHA1", hashlib.sha1(data).hexdigest()),
        ("SHA256", hashlib.sha256(data).hexdigest()),
        desc,
    ]
    return control_text(fields)


def _write_indexes(
    folder: Path, entries: list[str], label: str = "NVIDIA CUDA (gpunode lab stand-in)"
) -> None:
    packages = "\n".join(entries).encode()
    (folder / "Packages").write_bytes(packages)
    (folder / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    lines = [
        "Origin: NVIDIA",
        f"Label: {label}",
        "Architecture: x86_64",
        f"Date: {formatdate(time.time(), usegmt=True)}",
    ]
    files = [(name, (folder / name).read_bytes()) for name in ("Packages", "Packages.gz")]
    for title, algo in (("MD5Sum", "md5"), ("SHA1", "sha1"), ("SHA256", "sha256")):
        lines.append(f"{title}:")
        for name, blob in files:
            lines.append(f" {hashlib.new(algo, blob).hexdigest()} {len(blob):>16} {name}")
    (folder / "Release").write_text("\n".join(lines) + "\n")
