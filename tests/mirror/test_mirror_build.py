"""The mirror's downloads against a small repository served on loopback (no lab): the
signed indexes kept byte for byte, each .deb checked by SHA256, a second run fetching
nothing, a Packages that does not match its Release refused; and plan's refusal of a .deb
that a mirror's manifest does not hold."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gpunode.changes import Change, Step
from gpunode.facts.model import HostFacts
from gpunode.mirror.build import MirrorError, build
from gpunode.mirror.needs import Download, Folder
from gpunode.plan.aptcheck import unavailable
from gpunode.repoindex import FETCHED, FetchedIndex, parse_packages
from gpunode.resolve.index import IndexCatalog

DEBS = {"./a_1_amd64.deb": b"package a\n", "./b_2_all.deb": b"package b\n"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def packages_text(debs: dict[str, bytes]) -> str:
    a, b = debs["./a_1_amd64.deb"], debs["./b_2_all.deb"]
    return (
        f"Package: a\nVersion: 1\nArchitecture: amd64\nDepends: b (>= 2)\n"
        f"Filename: ./a_1_amd64.deb\nSize: {len(a)}\nSHA256: {sha(a)}\n\n"
        f"Package: b\nVersion: 2\nArchitecture: all\n"
        f"Filename: ./b_2_all.deb\nSize: {len(b)}\nSHA256: {sha(b)}\n"
    )


def write_repo(folder: Path, debs: dict[str, bytes], packages: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in debs.items():
        (folder / name).write_bytes(data)
    body = (packages or packages_text(debs)).encode()
    (folder / "Packages").write_bytes(body)
    listed = packages_text(debs).encode()  # what the Release was signed over
    (folder / "InRelease").write_text(
        f"-----BEGIN PGP SIGNED MESSAGE-----\n\nOrigin: test\nSHA256:\n"
        f" {sha(listed)} {len(listed)} Packages\n-----BEGIN PGP SIGNATURE-----\n"
    )


def folder(url: str) -> Folder:
    return Folder(url, "ubuntu2204/x86_64/", {("a", "1"), ("b", "2")})


def test_a_mirror_keeps_the_indexes_and_checks_each_deb(
    upstream: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    root, url, asked = upstream
    write_repo(root / "ubuntu2204" / "x86_64", DEBS)
    out = tmp_path / "mirror"
    build([folder(url)], out)
    got = out / "ubuntu2204" / "x86_64"
    for name in ("InRelease", "Packages", *DEBS):
        assert (got / name).read_bytes() == (root / "ubuntu2204" / "x86_64" / name).read_bytes()
    manifest = json.loads((got / "gpunode-mirror.json").read_text())["files"]
    assert manifest == {name: sha(data) for name, data in DEBS.items()}
    asked.clear()
    again = build([folder(url)], out)
    assert again.downloaded == []
    assert all(line.endswith(" 304") or line.endswith(" 404") for line in asked), asked
    assert not any(".deb" in line for line in asked), asked


def test_a_deb_that_does_not_match_the_index_is_not_kept(
    upstream: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    root, url, _ = upstream
    repo = root / "ubuntu2204" / "x86_64"
    write_repo(repo, DEBS)
    (repo / "b_2_all.deb").write_bytes(b"package B\n")  # same size, other bytes
    with pytest.raises(MirrorError, match=r"b_2_all.deb: SHA256 .* not kept"):
        build([folder(url)], tmp_path / "mirror")
    assert not (tmp_path / "mirror" / "ubuntu2204" / "x86_64" / "b_2_all.deb").exists()
    assert not (tmp_path / "mirror" / "ubuntu2204" / "x86_64" / "InRelease").exists()


def test_the_installer_is_kept_only_with_its_pinned_sha256(
    upstream: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    root, url, _ = upstream
    (root / "Miniconda3.sh").write_bytes(b"#!/bin/sh\n")
    base = url.split("/ubuntu2204/")[0]
    good = Download(f"{base}/Miniconda3.sh", "miniconda/Miniconda3.sh", sha(b"#!/bin/sh\n"), "pin")
    build([], tmp_path / "m", files=[good])
    assert (tmp_path / "m" / "miniconda" / "Miniconda3.sh").read_bytes() == b"#!/bin/sh\n"
    bad = Download(good.url, "miniconda/other.sh", sha(b"other"), "repos.conda_installer_sha256")
    with pytest.raises(MirrorError, match=r"repos\.conda_installer_sha256 says .*: not kept"):
        build([], tmp_path / "m", files=[bad])
    assert not (tmp_path / "m" / "miniconda" / "other.sh").exists()


def test_a_packages_that_does_not_match_its_release_is_refused(
    upstream: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    root, url, _ = upstream
    write_repo(root / "ubuntu2204" / "x86_64", DEBS, packages_text(DEBS) + "\n# mid-sync\n")
    with pytest.raises(MirrorError, match="does not match the SHA256 its Release lists"):
        build([folder(url)], tmp_path / "mirror")


def test_plan_refuses_a_deb_the_mirrors_manifest_does_not_hold() -> None:
    index = parse_packages(packages_text(DEBS))
    url = "http://127.0.0.1:8470/ubuntu2204/x86_64/"
    change = Change("driver", "a", "apt_packages", "absent", (Step("apt", installs=("a=1",)),))
    held = {"./a_1_amd64.deb": sha(DEBS["./a_1_amd64.deb"])}
    cat = IndexCatalog(FetchedIndex(url, url + "Packages", index, FETCHED, 0.0), lambda: held)
    why = unavailable([change], [cat], HostFacts())
    assert why == (
        f"driver: a: apt would download ./b_2_all.deb (b 2), which the mirror {url} does not"
        " hold: run `gpunode mirror` for this inventory again"
    )
    whole = {**held, "./b_2_all.deb": sha(DEBS["./b_2_all.deb"])}
    assert unavailable([change], [IndexCatalog(cat.fetched, lambda: whole)], HostFacts()) is None
    assert unavailable([change], [IndexCatalog(cat.fetched)], HostFacts()) is None  # no mirror
