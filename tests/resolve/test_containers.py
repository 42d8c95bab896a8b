"""The container toolkit's version: kept when installed and admitted, else the newest of
the spec in the libnvidia-container index; `update: latest` moves it; the index is read
only when needed, and a missing or unreadable one refuses with what to do."""

from __future__ import annotations

from typing import Any

import pytest

from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host
from gpunode.resolve.hostapt import HostCatalog
from gpunode.resolve.packages import Unresolvable
from gpunode.resolve.resolver import IndexNeeded, IndexUnavailable, resolve

OFFERED = ["1.16.2-1", "1.17.7-1", "1.17.8-1", "1.18.1-1"]
WHERE = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"


class Index:
    where = WHERE
    how = "Packages, fetched"

    def __init__(self) -> None:
        self.read = 0

    def versions(self, name: str) -> list[str]:
        return list(OFFERED) if name == "nvidia-container-toolkit" else []

    def names(self) -> list[str]:
        return ["nvidia-container-toolkit"]


def host(**containers: Any) -> Host:
    stack = {"containers": {"runtime": "docker", **containers}}
    return Host.model_validate({"name": "h", "address": "192.0.2.1", "stack": stack})


def facts(installed: str | None = None) -> HostFacts:
    pkgs = {}
    if installed:
        pkgs = {"nvidia-container-toolkit": {"name": "nvidia-container-toolkit",
                                             "version": installed}}  # fmt: skip
    return HostFacts.model_validate({"packages": pkgs})


def version(h: Host, f: HostFacts) -> tuple[str | None, int]:
    index = Index()

    def read() -> Index:
        index.read += 1
        return index

    return resolve(h, f, None, read).packages["containers"].version, index.read


@pytest.mark.parametrize(
    ("spec", "installed", "want", "reads"),
    [
        (None, None, "1.18.1-1", 1),  # nothing asked: the newest
        ("1.17", None, "1.17.8-1", 1),  # a series: its newest
        ("1.17.7-1", None, "1.17.7-1", 1),  # exact
        ("1.17", "1.17.7-1", "1.17.7-1", 0),  # installed and admitted: kept, no index
        (None, "1.16.2-1", "1.16.2-1", 0),
        ("1.18", "1.17.7-1", "1.18.1-1", 1),  # installed but another series: moved
    ],
)
def test_version(spec: str | None, installed: str | None, want: str, reads: int) -> None:
    assert version(host(version=spec), facts(installed)) == (want, reads)


def test_update_latest_moves_an_installed_one() -> None:
    assert version(host(update="latest"), facts("1.17.7-1")) == ("1.18.1-1", 1)
    assert version(host(version="1.17", update="latest"), facts("1.17.7-1")) == ("1.17.8-1", 1)


def test_a_spec_the_index_lacks_names_what_it_has() -> None:
    with pytest.raises(Unresolvable, match=r"1\.19 is not in .*: it has 1\.16, 1\.17, 1\.18"):
        version(host(version="1.19"), facts())


def test_an_unreadable_index_asks_the_hosts_apt_as_nvidias_does() -> None:
    def fails() -> Index:
        raise IndexUnavailable("connection refused")

    with pytest.raises(IndexNeeded, match=r"cannot read the repository's index") as exc:
        resolve(host(), facts(), None, fails)
    assert exc.value.names == ("nvidia-container-toolkit",)
    # the executor asks the host's apt once the repositories are added; its answer covers
    # every folder apt knows, and each repository configured reads its own folder of it
    cuda = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64"
    madison = (
        "".join(
            f"nvidia-container-toolkit | {v} | {WHERE.rstrip('/')}  Packages\n" for v in OFFERED
        )
        + "nvidia-container-toolkit | 1.12.0-1ubuntu1 | http://archive.ubuntu.com/ubuntu noble\n"
        + f"nvidia-container-toolkit | 1.19.0-1 | {cuda}  Packages\n"
    )
    nvidia, containers = HostCatalog(madison, cuda + "/"), HostCatalog(madison, WHERE)
    assert nvidia.versions("nvidia-container-toolkit") == ["1.19.0-1"]
    resolved = resolve(host(), facts(), lambda: nvidia, lambda: containers)
    assert resolved.packages["containers"].version == "1.18.1-1"
    assert f"versions from {WHERE} (read by the host's apt, apt-cache madison)" in resolved.notes
    # repos.nvidia: null, the container repository alone: the same path
    alone = host().model_copy(update={"repos": host().repos.model_copy(update={"nvidia": None})})
    resolved = resolve(alone, facts(), None, lambda: containers)
    assert resolved.packages["containers"].version == "1.18.1-1"


def test_no_repository_managed() -> None:
    h = Host.model_validate({"name": "h", "address": "192.0.2.1",
                             "repos": {"nvidia_container": None},
                             "stack": {"containers": {}}})  # fmt: skip
    with pytest.raises(Unresolvable, match=r"repos\.nvidia_container: null"):
        resolve(h, facts(), None, None)
    assert resolve(h, facts("1.17.8-1"), None, None).packages["containers"].version == "1.17.8-1"


def test_exact_version_cannot_move() -> None:
    with pytest.raises(ValueError, match="exact version cannot move"):
        host(version="1.17.8-1", update="latest")
