"""A CUDA toolkit resolves into a PackagePin as every package component does: the exact
release from NVIDIA's index (tests/fixtures/repoindex, an excerpt of NVIDIA's real
ubuntu2204/x86_64 Packages), the repository it came from, and why."""

from __future__ import annotations

from pathlib import Path

from gpunode.facts.model import CudaToolkit, HostFacts, Package
from gpunode.repoindex import FETCHED, FetchedIndex, parse_packages
from gpunode.resolve.index import IndexCatalog
from gpunode.resolve.packages import Catalog, PackagePin
from gpunode.resolve.resolver import resolve
from tests.plan.planhelpers import fresh_facts, host_from
from tests.plan.planhelpers import plan_host as _plan_host

INDEX = Path(__file__).parent.parent / "fixtures" / "repoindex" / "Packages-ubuntu2204-x86_64"
URL = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"

STACK = f"""
defaults:
  connection: local
  repos: {{nvidia: "{URL.removesuffix("/ubuntu2204/x86_64/")}"}}
  stack:
    cuda: {{toolkits: ["12.8"]}}
hosts:
  gpu1: {{}}
"""


def nvidia() -> Catalog:
    index = parse_packages(INDEX.read_text())
    return IndexCatalog(FetchedIndex(URL, URL + "Packages", index, FETCHED, 0.0))


def unread() -> Catalog:
    raise AssertionError("the index is read though the toolkit is installed")


def test_the_pin_is_the_newest_release_in_nvidias_index() -> None:
    # the capture has cuda-toolkit-12-8 at 12.8.0-1 and 12.8.1-1
    offered = nvidia().versions("cuda-toolkit-12-8")
    assert sorted(offered) == ["12.8.0-1", "12.8.1-1"]
    resolved = resolve(host_from(STACK), fresh_facts(), nvidia)
    (pin,) = resolved.toolkits
    assert isinstance(pin, PackagePin)
    assert (pin.cuda, pin.version, pin.packages, pin.hold) == (
        "12.8", "12.8.1-1", ("cuda-toolkit-12-8",), ()
    )  # fmt: skip
    assert pin.why == f"the newest in {URL}" and not pin.preinstalled
    assert f"cuda 12.8: 12.8.1-1, the newest in {URL}" in resolved.notes


def test_the_plan_and_its_json_install_that_exact_release() -> None:
    plan = _plan_host(host_from(STACK), fresh_facts(), probes={"systemd": False}, catalog=nvidia)
    assert plan.refused is None, plan.refused
    (change,) = [c for c in plan.changes if c.role == "cuda_toolkit" and c.op == "apt_packages"]
    assert change.task == "CUDA toolkit 12.8"
    assert change.steps[-1].command.endswith(" install -- cuda-toolkit-12-8=12.8.1-1")
    doc = plan.to_json()
    assert f"cuda 12.8: 12.8.1-1, the newest in {URL}" in doc["notes"]
    (shown,) = [c for c in doc["changes"] if c["task"] == "CUDA toolkit 12.8"]
    assert shown["commands"][-1].endswith("cuda-toolkit-12-8=12.8.1-1")


def test_an_installed_toolkit_is_kept_without_reading_the_index() -> None:
    pkg = Package(name="cuda-toolkit-12-8", version="12.8.0-1")
    facts = fresh_facts(packages={"cuda-toolkit-12-8": pkg})
    (pin,) = resolve(host_from(STACK), facts, unread).toolkits
    assert (pin.version, pin.why) == ("12.8.0-1", "installed")
    plan = _plan_host(host_from(STACK), facts, probes={"systemd": False}, catalog=unread)
    assert not [c for c in plan.changes if c.op == "apt_packages"], plan.changes


def test_a_toolkit_from_the_run_installer_is_used_as_it_is() -> None:
    facts: HostFacts = fresh_facts(
        toolkits=[CudaToolkit(version="12.8", path="/usr/local/cuda-12.8", nvcc="12.8.93")]
    )
    (pin,) = resolve(host_from(STACK), facts, unread).toolkits
    assert pin.preinstalled and pin.version == "12.8.93"
    plan = _plan_host(host_from(STACK), facts, probes={"systemd": False}, catalog=unread)
    assert not [c for c in plan.changes if c.op == "apt_packages"], plan.changes
