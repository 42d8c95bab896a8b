"""Compatibility rules (data in rules.yaml) and the checks built on them.

The rules hold compatibility facts and package naming only; which releases exist is for
the repository's own index to say (gpunode.resolve).
"""

from gpunode.compat.check import Finding, check_host
from gpunode.compat.rules import (
    cudnn_names,
    driver_packages,
    driver_userspace_package,
    min_driver,
    toolkit_package,
    toolkit_ubuntu,
    torch_variant,
)

__all__ = [
    "Finding",
    "check_host",
    "cudnn_names",
    "driver_packages",
    "driver_userspace_package",
    "min_driver",
    "toolkit_package",
    "toolkit_ubuntu",
    "torch_variant",
]
