"""The lab repository's apt folders: signed, indexed, and holding what gpunode asks for."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gpunode import compat
from gpunode.inventory.model import Driver
from gpunode_lab.repo import build_repository
from tests.lab_repo.conftest import ServedRepo

DISTROS = ("ubuntu2204", "ubuntu2404")

pytestmark = pytest.mark.skipif(
    shutil.which("gpgv") is None or shutil.which("dpkg-deb") is None,
    reason="needs gpgv and dpkg-deb",
)


def parse_packages(text: str) -> list[dict[str, str]]:
    out = []
    for stanza in text.strip().split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if line.startswith(" "):
                fields[key] += "\n" + line
            else:
                key, _, value = line.partition(": ")
                fields[key] = value
        out.append(fields)
    return out


def index(repo: ServedRepo, distro: str) -> list[dict[str, str]]:
    return parse_packages((repo.root / distro / "x86_64" / "Packages").read_text())


def versions(repo: ServedRepo, distro: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in index(repo, distro):
        out.setdefault(p["Package"], set()).add(p["Version"])
    return out


def keyring(repo: ServedRepo, distro: str, tmp_path: Path) -> Path:
    deb = repo.root / distro / "x86_64" / "cuda-keyring_1.1-1_all.deb"
    target = tmp_path / distro
    subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
    return target


@pytest.mark.parametrize("distro", DISTROS)
def test_release_is_signed_by_the_keyring_package(
    served_repo: ServedRepo, distro: str, tmp_path: Path
) -> None:
    folder = served_repo.root / distro / "x86_64"
    root = keyring(served_repo, distro, tmp_path)
    ring = root / "usr/share/keyrings/cuda-archive-keyring.gpg"
    assert ring.read_bytes()[:1] != b"-", "the keyring must be binary, as apt's signed-by= wants"
    ok = subprocess.run(["gpgv", "--keyring", str(ring), str(folder / "InRelease")], check=False)
    assert ok.returncode == 0
    detached = [
        "gpgv",
        "--keyring",
        str(ring),
        str(folder / "Release.gpg"),
        str(folder / "Release"),
    ]
    assert subprocess.run(detached, check=False).returncode == 0
    # A tampered Release must fail verification.
    bad = tmp_path / "Release"
    bad.write_text((folder / "Release").read_text().replace("Origin: NVIDIA", "Origin: x"))
    tampered = ["gpgv", "--keyring", str(ring), str(folder / "Release.gpg"), str(bad)]
    assert subprocess.run(tampered, check=False, capture_output=True).returncode != 0
    sources = (root / f"etc/apt/sources.list.d/cuda-{distro}-x86_64.list").read_text()
    assert sources == (
        "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
        f"{served_repo.url}/{distro}/x86_64/ /\n"
    )


@pytest.mark.parametrize("distro", DISTROS)
def test_release_checksums_match_the_indexes(served_repo: ServedRepo, distro: str) -> None:
    folder = served_repo.root / distro / "x86_64"
    release = (folder / "Release").read_text()
    for name in ("Packages", "Packages.gz"):
        digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert f" {digest} " in release
    assert (
        gzip.decompress((folder / "Packages.gz").read_bytes()) == (folder / "Packages").read_bytes()
    )


@pytest.mark.parametrize("distro", DISTROS)
def test_every_index_entry_matches_its_deb(served_repo: ServedRepo, distro: str) -> None:
    folder = served_repo.root / distro / "x86_64"
    entries = index(served_repo, distro)
    assert len(entries) > 200
    debs = {p.name for p in folder.glob("*.deb")}
    assert {e["Filename"].removeprefix("./") for e in entries} == debs
    for e in entries[::25]:  # dpkg-deb on a sample: fields agree with the index
        deb = folder / e["Filename"].removeprefix("./")
        assert hashlib.sha256(deb.read_bytes()).hexdigest() == e["SHA256"]
        info = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Package", "Version", "Architecture", "Depends"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"Package: {e['Package']}\n" in info
        assert f"Version: {e['Version']}\n" in info
        assert e["Architecture"] in ("amd64", "all")


def test_names_from_gpunode_naming_rules_are_published(served_repo: ServedRepo) -> None:
    """Names only: gpunode's naming rules and the lab's model of NVIDIA's repository are
    written apart; which versions exist the planner reads from the index itself."""
    for distro in DISTROS:
        have = versions(served_repo, distro)
        ubuntu = f"{distro[6:8]}.{distro[8:]}"
        for branch in ("535", "550", "570", "580", "590"):
            for flavor in ("open", "proprietary"):
                names = compat.driver_names(Driver(branch=branch, flavor=flavor))
                for name in (*names.install, names.fabricmanager):
                    assert name in have, (distro, name)
        for cuda in ("12.4", "12.8", "13.0"):
            pkg = compat.toolkit_package(cuda)
            assert (pkg in have) == (ubuntu in compat.toolkit_ubuntu(cuda)), (distro, pkg)
        for cuda in ("12.4", "13.0"):
            names = compat.cudnn_names("9", cuda)
            assert names is not None and set(names) <= set(have), (distro, names)
        assert {"libnccl2", "libnccl-dev"} <= set(have)


def _closure(entries: list[dict[str, str]], start: str) -> set[str]:
    by_name = {}
    for e in entries:
        by_name.setdefault(e["Package"], e)  # any version: shapes are the same
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        for dep in by_name[name].get("Depends", "").split(","):
            if dep.strip():
                todo.append(dep.split("(")[0].split("|")[0].strip())
    return seen


def test_dependency_shapes(served_repo: ServedRepo) -> None:
    entries = index(served_repo, "ubuntu2204")
    by_key = {(e["Package"], e["Version"]): e for e in entries}
    toolkit = _closure(entries, "cuda-toolkit-12-4")
    for part in (
        "cuda-compiler-12-4",
        "cuda-nvcc-12-4",
        "cuda-cudart-dev-12-4",
        "cuda-libraries-12-4",
        "cuda-libraries-dev-12-4",
        "cuda-toolkit-12-4-config-common",
        "cuda-toolkit-12-config-common",
        "cuda-toolkit-config-common",
    ):
        assert part in toolkit
    assert not any(n.startswith(("cuda-drivers", "nvidia-")) for n in toolkit)
    assert "cuda-drivers" in _closure(entries, "cuda-12-4"), "cuda-X-Y pulls a driver, as NVIDIA's"
    nvcc = by_key[("cuda-nvcc-12-4", "12.4.131-1")]
    assert nvcc["Version"] == "12.4.131-1"
    d570 = by_key[("nvidia-driver-570-open", "570.195.03-0ubuntu1")]
    assert "nvidia-driver-550-open" in d570["Conflicts"]
    assert "nvidia-driver-570" in d570["Conflicts"]  # flavours exclude each other
    lib570 = by_key[("libnvidia-compute-570", "570.195.03-0ubuntu1")]
    assert "libnvidia-compute-550" in lib570["Conflicts"]
    assert "libnvidia-compute-550" in lib570["Replaces"]
    assert "nvidia-driver-550-open" in _closure(entries, "nvidia-open-550")
    assert "nvidia-dkms-550" in _closure(entries, "cuda-drivers-550")
    unversioned = _closure(entries, "nvidia-open")
    assert {"nvidia-driver-open", "nvidia-dkms-open", "libnvidia-compute"} <= unversioned
    assert ("nvidia-driver-pinning-590", "590-1") in by_key


def test_build_is_cached_and_follows_the_url(tmp_path: Path) -> None:
    t0 = time.monotonic()
    root = build_repository(tmp_path, "http://127.0.0.1:1")
    cold = time.monotonic() - t0
    release = (root / "ubuntu2404/x86_64/Release").read_bytes()
    t0 = time.monotonic()
    assert build_repository(tmp_path, "http://127.0.0.1:1") == root
    warm = time.monotonic() - t0
    assert (root / "ubuntu2404/x86_64/Release").read_bytes() == release
    assert warm < 1.0 and cold < 30.0, (cold, warm)
    key = (tmp_path / "key/secret.asc").read_bytes()
    build_repository(tmp_path, "http://127.0.0.1:2")
    assert (tmp_path / "key/secret.asc").read_bytes() == key, "the key is generated once"
    listing = subprocess.run(
        ["dpkg-deb", "--fsys-tarfile", str(root / "ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb")],
        capture_output=True,
        check=True,
    ).stdout
    assert b"http://127.0.0.1:2/ubuntu2404/x86_64/" in listing
