"""Packages index text -> PackageIndex.

The fixture holds NVIDIA-style stanzas written for these tests (field order and naming as
in developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/Packages); the
shared H200 captures hold only installed-package state, no repository index.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpunode.repoindex import PackageIndex, PackageVersion, parse_packages
from gpunode.versions import compare_debian, matches_prefix
from tests.repoindex.conftest import FIX

FIXTURE = FIX / "Packages-ubuntu2204-x86_64"


@pytest.fixture(scope="module")
def nvidia() -> PackageIndex:
    return parse_packages(FIXTURE.read_text())


def test_driver_branch_releases_in_debian_order(nvidia: PackageIndex) -> None:
    # Text order would put 550.127.05 and 550.163.01 before 550.54.15.
    assert nvidia.version_strings("nvidia-open-550") == (
        "550.54.15-0ubuntu1",
        "550.127.05-0ubuntu1",
        "550.163.01-0ubuntu1",
    )
    in_branch = [v for v in nvidia.version_strings("nvidia-open-550") if matches_prefix(v, "550")]
    assert in_branch[-1] == "550.163.01-0ubuntu1"
    latest = nvidia.latest("nvidia-open-570")
    assert latest is not None and latest.version == "570.133.20-0ubuntu1"


def test_cudnn_toolkit_and_nccl(nvidia: PackageIndex) -> None:
    assert nvidia.version_strings("libcudnn9-cuda-12") == (
        "9.8.0.87-1",
        "9.10.2.21-1",
        "9.14.0.64-1",
    )
    assert nvidia.version_strings("libcudnn9-cuda-13") == ("9.14.0.64-1",)
    assert nvidia.version_strings("cuda-toolkit-12-8") == ("12.8.0-1", "12.8.1-1")
    assert nvidia.version_strings("libnccl2") == (
        "2.21.5-1+cuda12.4",
        "2.26.2-1+cuda12.2",
        "2.26.2-1+cuda12.8",
        "2.26.5-1+cuda12.9",
        "2.28.3-1+cuda13.0",
    )
    nccl = nvidia.versions("libnccl2")[2]
    assert nccl == PackageVersion(
        name="libnccl2",
        version="2.26.2-1+cuda12.8",
        architecture="amd64",
        provides="libnccl",
        depends="",
        filename="./libnccl2_2.26.2-1+cuda12.8_amd64.deb",
        size=204585102,
        sha256=nccl.sha256,
        installed_size=430000,  # KiB, the stanza's Installed-Size
    )
    assert len(nccl.sha256) == 64
    assert nvidia.providers("libnccl") == ("libnccl2",)
    assert nvidia.providers("libcudnn9-cuda") == ("libcudnn9-cuda-12", "libcudnn9-cuda-13")
    assert nvidia.versions("libnccl-dev")[0].depends == "libnccl2 (= 2.21.5-1+cuda12.4)"


def test_folded_depends_joined(nvidia: PackageIndex) -> None:
    toolkit = nvidia.versions("cuda-toolkit-12-8")[-1]
    assert toolkit.depends.startswith("cuda-compiler-12-8 (>= 12.8.1-1), cuda-libraries-12-8")
    assert "(>= 12.8.1-1), cuda-libraries-dev-12-8 (>= 12.8.1-1)," in toolkit.depends
    assert toolkit.depends.endswith("cuda-nvml-dev-12-8 (>= 12.8.1-1)")
    assert "\n" not in toolkit.depends


def test_duplicate_stanza_kept_once_and_arch_all(nvidia: PackageIndex) -> None:
    assert FIXTURE.read_text().count("Version: 550.54.15-0ubuntu1\n") == 3  # 2 packages + a repeat
    assert len(nvidia.versions("nvidia-open-550")) == 3
    assert nvidia.skipped == 0
    assert "cuda-keyring" in nvidia and "nvidia-open-999" not in nvidia
    assert nvidia.versions("cuda-keyring", arch="amd64")[0].architecture == "all"
    assert nvidia.versions("libnccl2", arch="arm64") == ()
    assert nvidia.versions("no-such-package") == ()
    assert nvidia.latest("no-such-package") is None
    assert list(nvidia) == sorted(nvidia.names()) and len(nvidia) == len(nvidia.names())


def test_model_is_immutable(nvidia: PackageIndex) -> None:
    v = nvidia.versions("libnccl2")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.version = "9"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        nvidia.skipped = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        nvidia._by_name["x"] = ()  # type: ignore[index]
    assert isinstance(nvidia.versions("libnccl2"), tuple)


def test_crlf_missing_final_newline_tabs_and_case() -> None:
    text = (
        "Package: a\r\nVersion: 1.0-1\r\nArchitecture: amd64\r\nDepends: b,\r\n\tc (>= 2)\r\n"
        "\r\n \r\n\r\n"  # several separators, one of them only whitespace
        "package: a\r\nVERSION: 1.10-1\r\narchitecture: amd64"  # no final newline
    )
    idx = parse_packages(text)
    assert idx.version_strings("a") == ("1.0-1", "1.10-1")
    assert idx.versions("a")[0].depends == "b, c (>= 2)"


def test_incomplete_and_malformed_stanzas_are_skipped() -> None:
    text = """Package: nover
Architecture: amd64

Version: 1.0-1
Architecture: amd64

Package: badver
Version: not a version

Package: badepoch
Version: x:1.0

Package: ok
Version: 1:2.0~rc1-1
Version: 3.0-1
Size: twelve
garbage line without colon
 continuation of nothing useful
# a comment
Provides: ok-virtual (= 2.0)
"""
    idx = parse_packages(text)
    assert idx.names() == ("ok",)
    assert idx.skipped == 4
    ok = idx.versions("ok")[0]
    assert ok.version == "1:2.0~rc1-1"  # a repeated field keeps its first value
    assert ok.size is None and ok.provides == "ok-virtual (= 2.0)"
    assert idx.providers("ok-virtual") == ("ok",)
    assert repr(idx) == "<PackageIndex 1 packages, 4 skipped>"


def test_empty_index() -> None:
    for text in ("", "\n\n", "\r\n"):
        idx = parse_packages(text)
        assert len(idx) == 0 and idx.skipped == 0


def test_same_version_two_architectures() -> None:
    text = "".join(f"Package: k\nVersion: 1.1-1\nArchitecture: {a}\n\n" for a in ("all", "amd64"))
    idx = parse_packages(text)
    assert [v.architecture for v in idx.versions("k")] == ["all", "amd64"]
    assert idx.version_strings("k") == ("1.1-1",)


_versions = st.from_regex(
    r"(?:[0-9]:)?[0-9]{1,3}(?:[.~+][0-9a-z]{1,3}){0,3}(?:-[0-9a-z.+~]{1,4})?", fullmatch=True
)


@given(st.lists(_versions, min_size=1, max_size=12))
def test_versions_sorted_by_dpkg_order(versions: list[str]) -> None:
    text = "\n".join(f"Package: p\nVersion: {v}\nArchitecture: amd64\n" for v in versions)
    got = parse_packages(text).version_strings("p")
    assert set(got) == set(versions)
    assert all(compare_debian(a, b) <= 0 for a, b in itertools.pairwise(got))
