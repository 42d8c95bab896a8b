"""Compatibility rules (data in rules.yaml) and the checks built on them.

The rules hold compatibility facts and package naming only; which releases exist is for
the repository's own index to say (gpunode.resolve). What a driver branch means is
decided in gpunode.compat.driver alone.
"""

from collections.abc import Callable
from typing import Any

from gpunode.compat.check import Finding, check_host
from gpunode.compat.driver import DriverNames, driver_names, torch_variant
from gpunode.compat.frameworks import conda_tos_channels, torch_packages
from gpunode.compat.rules import (
    cudnn_names,
    min_driver,
    toolkit_package,
    toolkit_ubuntu,
)

# What roles call as `compat.NAME` in their YAML and templates, each under its own name:
# a search for one of these functions finds its uses in roles/ as well.
TEMPLATE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (
        toolkit_package,
        toolkit_ubuntu,
        cudnn_names,
        torch_variant,
        torch_packages,
        conda_tos_channels,
        min_driver,
    )
}

__all__ = [
    "TEMPLATE_FUNCTIONS",
    "DriverNames",
    "Finding",
    "check_host",
    "conda_tos_channels",
    "cudnn_names",
    "driver_names",
    "min_driver",
    "toolkit_package",
    "toolkit_ubuntu",
    "torch_packages",
    "torch_variant",
]
