"""Compatibility rules (data in rules.yaml) and the checks built on them."""

from gpunode.compat.check import Finding, check_host
from gpunode.compat.rules import (
    cudnn_package,
    driver_packages,
    driver_userspace_package,
    driver_version,
    min_driver,
    nccl_build,
    toolkit_package,
    toolkit_ubuntu,
    torch_variant,
)

__all__ = [
    "Finding",
    "check_host",
    "cudnn_package",
    "driver_packages",
    "driver_userspace_package",
    "driver_version",
    "min_driver",
    "nccl_build",
    "toolkit_package",
    "toolkit_ubuntu",
    "torch_variant",
]
