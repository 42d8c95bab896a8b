"""The planner tests' helpers: the fixture index, the stack they plan, fresh facts.

A module with its own name, imported as `tests.plan.planhelpers`: `from conftest import`
would take whichever folder's conftest was imported last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpunode.changes import HostPlan
from gpunode.facts.model import Disk, HostFacts, KernelModule, OsRelease, PciGpu
from gpunode.inventory import Host, loads
from gpunode.plan.planner import plan_host as _plan_host
from gpunode.repoindex import FETCHED, FetchedIndex, parse_packages
from gpunode.resolve.index import IndexCatalog
from gpunode.resolve.packages import Catalog

FIX = Path(__file__).parent.parent / "fixtures" / "plan"
REPO_URL = "http://127.0.0.1:8080/cuda/repos/ubuntu2204/x86_64/"


def catalog(path: Path = FIX / "Packages") -> Catalog:
    """An index in the layout of NVIDIA's (several releases per branch, builds per version),
    written by hand: what the planner resolves against when a spec needs the repository."""
    index = parse_packages(path.read_text())
    return IndexCatalog(FetchedIndex(REPO_URL, REPO_URL + "Packages", index, FETCHED, 0.0))


def plan_host(host: Host, facts: HostFacts, **kw: Any) -> HostPlan:
    """The planner with the fixture index as the host's repository (unless told otherwise)."""
    kw.setdefault("catalog", catalog)
    return _plan_host(host, facts, **kw)


STACK = """
defaults:
  connection: local
  repos:
    nvidia: http://127.0.0.1:8080/cuda/repos
    conda_installer: http://127.0.0.1:8080/conda/Miniconda3.sh
    pytorch_index: http://127.0.0.1:8080/whl
    insecure_http: true
    conda_installer_sha256: "1111111111111111111111111111111111111111111111111111111111111111"
  stack:
    driver: {branch: "550", flavor: open}
    cuda: {toolkits: ["12.4"], default: "12.4"}
    cudnn: "9"
    nccl: "2.21"
    cuda_env: true
hosts:
  gpu1: {}
"""


def host_from(text: str, name: str = "gpu1", file: str = "inv.yaml") -> Host:
    return loads(text, file).hosts[name]


def fresh_facts(release: str = "22.04", **kw: object) -> HostFacts:
    codename = {"20.04": "focal", "22.04": "jammy", "24.04": "noble"}.get(release, "")
    base = HostFacts(
        hostname="gpu1",
        os=OsRelease(id="ubuntu", version_id=release, codename=codename),
        arch="amd64",
        kernel="6.8.0-45-generic",
        secure_boot=False,
        boot_id="11111111-2222-3333-4444-555555555555",
        disks=[Disk(path="/", free_bytes=200 * 10**9, total_bytes=400 * 10**9)],
        pci_gpus=[PciGpu(slot="0000:00:06.0", device_id="2335", description="NVIDIA H200")],
        module=KernelModule(),
    )
    return base.model_copy(update=kw)
