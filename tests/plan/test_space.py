"""The free-space preflight counts every filesystem a plan's packages write to, from the
index's Installed-Size and Size: against the lab's repository (built by gpunode_lab from its
own data, not from anything gpunode says) and a small index of realistic sizes."""

from __future__ import annotations

import re
from functools import cache

import pytest
from test_resolution import stack

from gpunode.changes import Change, Step
from gpunode.facts.model import Disk, HostFacts, Package
from gpunode.plan.space import space_refusal
from gpunode.repoindex import FETCHED, FetchedIndex, PackageIndex
from gpunode.repoindex.packages import parse_packages
from gpunode.resolve.index import IndexCatalog
from gpunode.resolve.packages import Catalog
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host

gpunode_lab = pytest.importorskip("gpunode_lab")
from gpunode_lab.repo import catalog as lab_catalog  # noqa: E402
from gpunode_lab.repo.build import _index_entry  # noqa: E402
from gpunode_lab.repo.deb import deb_bytes  # noqa: E402

NO_SYSTEMD = {"systemd": False}
MIB = 1 << 20
ROOT = Disk(path="/", free_bytes=200 * 10**9, total_bytes=400 * 10**9, fstype="ext4")


@cache
def lab_2204() -> Catalog:
    """The Packages index the lab serves for Ubuntu 22.04: its stanzas as the lab's
    repository writes them, Size from the .debs it builds."""
    packages = lab_catalog.packages_for("ubuntu2204", "full")
    return catalog_of(parse_packages("\n".join(_index_entry(p, deb_bytes(p)) for p in packages)))


def catalog_of(index: PackageIndex) -> Catalog:
    url = "http://127.0.0.1:8080/cuda/repos/ubuntu2204/x86_64/"
    return IndexCatalog(FetchedIndex(url, url + "Packages", index, FETCHED, 0.0))


def with_disks(facts: HostFacts, *disks: Disk) -> HostFacts:
    return facts.model_copy(update={"disks": [ROOT, *disks]})


def tmpfs(path: str, total_mib: int, free_mib: int) -> Disk:
    return Disk(path=path, total_bytes=total_mib * MIB, free_bytes=free_mib * MIB, fstype="tmpfs")


def test_a_small_filesystem_on_the_toolkits_folder_refuses_the_host() -> None:
    """The measured failure: a full filesystem mounted on /usr/local/cuda-X.Y, which the
    preflight did not look at, left dpkg half-done."""
    host = host_from(STACK)
    facts = with_disks(fresh_facts(), tmpfs("/usr/local/cuda-12.4", 4, 1))
    plan = plan_host(host, facts, probes=NO_SYSTEMD, catalog=lab_2204)
    assert plan.refused is not None and not plan.changes
    assert plan.refused.startswith(
        "too little disk on /usr/local/cuda-12.4 (a tmpfs of 4 MiB): 1 MiB free, "
    ), plan.refused
    needed = re.search(r"(\d+) MiB needed by (.*): free space or mount a larger", plan.refused)
    assert needed is not None, plan.refused
    assert int(needed.group(1)) > 1
    assert needed.group(2) == "cuda-toolkit-12-4=12.4.1-1"  # the toolkit's packages alone
    assert "cudnn" not in needed.group(2) and "nvidia-open" not in needed.group(2)
    assert "/boot" not in plan.refused and "too little disk on / " not in plan.refused
    # a toolkit alone (no driver, cuDNN or NCCL in the same plan) is counted the same
    alone = {'driver: {branch: "550", flavor: open}': "driver: null", "cudnn:": "#", "nccl:": "#"}
    toolkit = host_from(stack(**alone))
    plan = plan_host(toolkit, facts, probes=NO_SYSTEMD, catalog=lab_2204)
    assert plan.refused is not None
    assert "33 MiB needed by cuda-toolkit-12-4=12.4.1-1:" in plan.refused
    # room enough on the same mount: planned as before
    roomy = with_disks(fresh_facts(), tmpfs("/usr/local/cuda-12.4", 4096, 4000))
    plan = plan_host(host, roomy, probes=NO_SYSTEMD, catalog=lab_2204)
    assert plan.refused is None, plan.refused


def test_a_small_boot_refuses_a_driver_change_and_not_a_toolkit() -> None:
    host = host_from(STACK)
    facts = with_disks(fresh_facts(), tmpfs("/boot", 40, 40))
    plan = plan_host(host, facts, probes=NO_SYSTEMD, catalog=lab_2204)
    assert plan.refused is not None
    assert plan.refused == (  # the initramfs: a fixed estimate, no margin on it
        "too little disk on /boot (a tmpfs of 40 MiB): 40 MiB free, 100 MiB needed by "
        "nvidia-open-550=550.163.01-*: free space or mount a larger filesystem"
    )
    toolkit = host_from(STACK.replace('driver: {branch: "550", flavor: open}', "driver: null"))
    plan = plan_host(toolkit, facts, probes=NO_SYSTEMD, catalog=lab_2204)
    assert plan.refused is None, plan.refused


def test_a_full_archives_refuses_every_package_change() -> None:
    facts = with_disks(fresh_facts(), tmpfs("/var/cache/apt/archives", 8, 0))
    plan = plan_host(host_from(STACK), facts, probes=NO_SYSTEMD, catalog=lab_2204)
    assert plan.refused is not None
    assert plan.refused.startswith(
        "too little disk on /var/cache/apt/archives (a tmpfs of 8 MiB): 0 MiB free, "
    ), plan.refused
    # every package change downloads: the four largest named, the rest counted
    named = plan.refused.split(" MiB needed by ")[1].split(": free space")[0]
    for asked in (
        "nvidia-open-550=",
        "cuda-toolkit-12-4",
        "libcudnn9-dev-cuda-12=",
        "libnccl-dev=",
    ):
        assert asked in named, plan.refused
    assert named.endswith(" and 2 more"), plan.refused


# Sizes of NVIDIA's 12.4.1 packages' order of magnitude: a toolkit's parts under
# /usr/local/cuda-12.4, Nsight Systems under /opt/nvidia.
INDEX = """\
Package: cuda-toolkit-12-4
Version: 12.4.1-1
Architecture: amd64
Installed-Size: 8
Depends: cuda-nvcc-12-4 (>= 12.4.131), nsight-systems-2023.4.4, libc6 (>= 2.17),
 cuda-cudart-12-4 | cuda-gone
Size: 2600

Package: cuda-nvcc-12-4
Version: 12.4.99-1
Architecture: amd64
Installed-Size: 1
Size: 100

Package: cuda-nvcc-12-4
Version: 12.4.131-1
Architecture: amd64
Installed-Size: 3000000
Size: 900000000

Package: cuda-cudart-12-4
Version: 12.4.127-1
Architecture: amd64
Installed-Size: 1000
Size: 200000

Package: nsight-systems-2023.4.4
Version: 2023.4.4.54-1
Architecture: amd64
Installed-Size: 500000
Size: 300000000
"""


def sized_index() -> Catalog:
    return catalog_of(parse_packages(INDEX))


TOOLKIT = Change(
    "cuda",
    "CUDA toolkit 12.4",
    "apt_packages",
    "missing",
    (Step("apt-get install", installs=("cuda-toolkit-12-4=12.4.1-1",)),),
    apt=True,
)


def test_sizes_are_summed_per_filesystem_with_the_dependencies_apt_takes() -> None:
    host = host_from(STACK)
    facts = with_disks(
        fresh_facts(),
        tmpfs("/usr/local/cuda-12.4", 64, 3),
        Disk(path="/opt", total_bytes=1000 * MIB, free_bytes=100 * MIB, fstype="xfs"),
        Disk(path="/var/cache/apt/archives", total_bytes=2048 * MIB, free_bytes=2000 * MIB),
    )
    why = space_refusal(host, [TOOLKIT], [sized_index()], facts)
    # /opt: nsight 500000 KiB = 512000000 B, +5 % = 537600000, +32 MiB = 571154432 B: 545 MiB
    # cuda-12.4: nvcc 12.4.131 (the newest satisfying >=) 3000000 KiB, cudart 1000, the
    # toolkit 8: 3073032192 B, +5 % = 3226683801, +32 MiB = 3260238233 B: 3110 MiB
    # archives: 900000000 + 300000000 + 200000 + 2600 = 1200202600 B, +5 % and 32 MiB:
    # 1293767162 B, 1234 MiB, less than the 2000 free: not named
    assert why == (
        "too little disk on /opt (a xfs of 1000 MiB): 100 MiB free, 545 MiB needed by "
        "cuda-toolkit-12-4=12.4.1-1: free space or mount a larger filesystem; "
        "too little disk on /usr/local/cuda-12.4 (a tmpfs of 64 MiB): 3 MiB free, 3110 MiB "
        "needed by cuda-toolkit-12-4=12.4.1-1: free space or mount a larger filesystem"
    )
    # what the host has at the version apt would take is not counted again
    nsight = Package(
        name="nsight-systems-2023.4.4", version="2023.4.4.54-1", status="install ok installed"
    )
    has = facts.model_copy(update={"packages": {**facts.packages, nsight.name: nsight}})
    has_why = space_refusal(host, [TOOLKIT], [sized_index()], has)
    assert has_why is not None and "/opt" not in has_why and "3110 MiB" in has_why


class MadisonOnly:
    """The host's apt-cache catalog: versions, no sizes, no Depends."""

    where = "the host's apt"
    how = "apt-cache madison"

    def versions(self, name: str) -> list[str]:
        return ["12.4.1-1"] if name == "cuda-toolkit-12-4" else []

    def names(self) -> list[str]:
        return ["cuda-toolkit-12-4"]


@pytest.mark.parametrize("catalogs", [[], [MadisonOnly()]])
def test_without_an_index_to_count_from_the_guess_stands(catalogs: list[Catalog]) -> None:
    host = host_from(STACK)
    small = Disk(path="/var/cache/apt/archives", total_bytes=600 * MIB, free_bytes=500 * MIB)
    why = space_refusal(host, [TOOLKIT], catalogs, with_disks(fresh_facts(), small))
    assert why is not None
    assert why.startswith(
        "too little disk for apt's downloads: 500 MiB free in /var/cache/apt/archives, "
        "1024 MiB needed before installing the driver, CUDA 12.4, cuDNN, NCCL"
    ), why
