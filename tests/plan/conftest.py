"""Fixtures for planner tests: facts in, commands out (no host needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.facts.model import Disk, HostFacts, KernelModule, OsRelease, PciGpu
from gpunode.inventory import Host, loads

FIX = Path(__file__).parent.parent / "fixtures" / "plan"

STACK = """
defaults:
  connection: local
  repos:
    nvidia: http://127.0.0.1:8080/cuda/repos
    conda_installer: http://127.0.0.1:8080/conda/Miniconda3.sh
    pytorch_index: http://127.0.0.1:8080/whl
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


@pytest.fixture
def host() -> Host:
    return host_from(STACK)


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


@pytest.fixture
def fresh() -> HostFacts:
    return fresh_facts()
