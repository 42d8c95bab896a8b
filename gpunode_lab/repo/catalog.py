"""What each folder of the lab repository holds: stand-in packages with NVIDIA's names,
versions and shapes, as nvidia_repo.yaml says NVIDIA (or a lagging mirror) publishes them.

Package contents are tiny stand-ins; catalog_driver, catalog_kernel, catalog_toolkit,
catalog_cudnn, catalog_nccl, catalog_tensorrt and catalog_dcgm write them.
"""

from __future__ import annotations

from gpunode_lab.repo import nvidia_repo
from gpunode_lab.repo.catalog_cudnn import cudnn8_packages, cudnn9_packages
from gpunode_lab.repo.catalog_dcgm import dcgm_packages
from gpunode_lab.repo.catalog_driver import driver_packages
from gpunode_lab.repo.catalog_kernel import kernel_packages
from gpunode_lab.repo.catalog_nccl import nccl_packages
from gpunode_lab.repo.catalog_tensorrt import tensorrt_packages
from gpunode_lab.repo.catalog_toolkit import toolkit_packages
from gpunode_lab.repo.deb import Package, Payload

DISTROS = tuple(nvidia_repo.distros())


def packages_for(distro: str, mirror: str = "full") -> list[Package]:
    """Everything but the keyring, for one Ubuntu release's folder."""
    folder = nvidia_repo.folder(distro, mirror)
    majors = tuple(sorted({m for ms in nvidia_repo.cudnn9().values() for m in ms}))
    out = driver_packages(folder.branches) + kernel_packages()
    out += cudnn9_packages(folder.cudnn9, majors) + cudnn8_packages(folder.cudnn8)
    out += nccl_packages(folder.nccl)
    out += tensorrt_packages(folder.tensorrt)
    out += dcgm_packages(folder.dcgm)
    for tk in folder.toolkits:
        out += toolkit_packages(tk)
    gone = nvidia_repo.withheld_packages(mirror)
    return [p for p in out if (p.name, p.version.split("-")[0]) not in gone]


def keyring_package(distro: str, base_url: str, keyring: bytes) -> Package:
    url = f"{base_url.rstrip('/')}/{distro}/x86_64/"
    listing = f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {url} /\n"
    lst = f"/etc/apt/sources.list.d/cuda-{distro}-x86_64.list"
    return Package(
        "cuda-keyring",
        "1.1-1",
        "GPG keyring for the CUDA repository\n Installs the repository's signing key and "
        "its sources.list entry.",
        architecture="all",
        section="non-free/admin",
        files=[
            Payload("/usr/share/keyrings/cuda-archive-keyring.gpg", keyring),
            Payload(lst, listing.encode()),
        ],
        conffiles=[lst],
    )
