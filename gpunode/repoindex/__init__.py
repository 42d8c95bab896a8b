"""Read the Packages index of the apt repository a host uses, on the controller.

gpunode resolves version specs ("driver branch 550", "cuDNN 9.10") to exact Debian
versions before planning. This package fetches a flat repository folder's index
(NVIDIA's CUDA repository or a mirror: Packages.xz, .gz or plain), caches it on disk
with HTTP validators, and parses it into name -> versions in Debian order.

It does not verify the InRelease / Release.gpg signature: apt on the host does that
when it installs, and the controller uses the index only to choose versions. It does
not resolve dependencies or choose versions itself either; callers do.
"""

from gpunode.repoindex.fetch import (
    FETCHED,
    MIRROR_MANIFEST,
    NOT_MODIFIED,
    STALE,
    FetchedIndex,
    IndexCache,
    IndexUnavailable,
    Source,
    default_cache_dir,
    normalize_repo_url,
)
from gpunode.repoindex.packages import PackageIndex, PackageVersion, parse_packages

__all__ = [
    "FETCHED",
    "MIRROR_MANIFEST",
    "NOT_MODIFIED",
    "STALE",
    "FetchedIndex",
    "IndexCache",
    "IndexUnavailable",
    "PackageIndex",
    "PackageVersion",
    "Source",
    "default_cache_dir",
    "normalize_repo_url",
    "parse_packages",
]
