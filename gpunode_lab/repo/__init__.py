"""The lab's package repository: NVIDIA-style signed apt folders, stand-in wheels, conda.

`build_repository(dest, base_url, mirror)` builds it once (cached by generator version,
URL and mirror kind) and returns the folder the lab serves over HTTP at base_url.
"""

from gpunode_lab.repo.build import build_repository

__all__ = ["build_repository"]
