"""Version specs made exact for each host, between its facts and its plan.

`specs` says what "550", "9.10" or "2.26.2-1+cuda12.8" admit; `resolver` picks, per host,
the installed version that satisfies a spec or else the newest the repository offers.
"""

from gpunode.resolve.packages import Catalog, PackagePin, Unresolvable, resolve_package
from gpunode.resolve.resolver import (
    CatalogFor,
    DriverPin,
    IndexNeeded,
    IndexUnavailable,
    Resolved,
    Sizes,
    installed_driver,
    resolve,
    wanted_names,
)

__all__ = [
    "Catalog",
    "CatalogFor",
    "DriverPin",
    "IndexNeeded",
    "IndexUnavailable",
    "PackagePin",
    "Resolved",
    "Sizes",
    "Unresolvable",
    "installed_driver",
    "resolve",
    "resolve_package",
    "wanted_names",
]
