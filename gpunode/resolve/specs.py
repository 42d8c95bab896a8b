"""What a version written in the inventory means, as pure functions of version strings.

A spec is a dotted prefix ("550", "9.10", "2.26": any release under it) or a full Debian
version ("9.14.0.64-1", "2.26.2-1+cuda12.8": that one build). Picking is always the newest
match in Debian order; an installed version that satisfies the spec is kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpunode.versions import compare_dotted, debian_key, dotted_key, matches_prefix, split_debian

_BUILD = re.compile(r"\+cuda(\d+\.\d+)")


def is_exact(spec: str) -> bool:
    """A full Debian version pins one build; a dotted prefix admits a series."""
    return "-" in spec


def upstream(version: str) -> str:
    """ "2.26.2-1+cuda12.8" -> "2.26.2"; "1:550.163.01-0ubuntu1" -> "550.163.01"."""
    return split_debian(version)[1]


def satisfies(version: str, spec: str) -> bool:
    """Whether a Debian version is what `spec` asks for ("9.10" admits 9.10.2.21-1 and not
    9.14.0.64-1; "2.26.2-1+cuda12.8" admits only itself)."""
    if is_exact(spec):
        return _same_debian(version, spec)
    return matches_prefix(upstream(version), spec)


def _same_debian(a: str, b: str) -> bool:
    return debian_key(a) == debian_key(b)


def build_cuda(version: str) -> str | None:
    """The CUDA a build is made for: "2.26.2-1+cuda12.8" -> "12.8"; None when unmarked."""
    m = _BUILD.search(split_debian(version)[2])
    return m.group(1) if m else None


def fits_toolkit(version: str, toolkit: str) -> bool:
    """A `+cudaX.Y` build runs with a toolkit of the same major that is not older than X.Y."""
    cuda = build_cuda(version)
    if cuda is None:
        return True
    return cuda.split(".")[0] == toolkit.split(".")[0] and compare_dotted(cuda, toolkit) <= 0


def newest(versions: Iterable[str]) -> str | None:
    return max(versions, key=debian_key, default=None)


def pick(available: Iterable[str], spec: str, toolkit: str | None = None) -> str | None:
    """The newest available version that satisfies `spec` (and fits `toolkit`, if given)."""
    return newest(
        v for v in available if satisfies(v, spec) and (toolkit is None or fits_toolkit(v, toolkit))
    )


def release_of(version: str) -> str:
    """A build's release without its CUDA: "10.13.3.9-1+cuda13.0" -> "10.13.3.9-1"."""
    return version.split("+cuda", 1)[0]


def builds_for_major(versions: Iterable[str], toolkit: str) -> list[str]:
    """The `+cudaX.Y` builds made for the toolkit's CUDA major, in Debian order."""
    major = toolkit.split(".")[0]
    return sorted(
        (v for v in versions if (c := build_cuda(v)) and c.split(".")[0] == major),
        key=debian_key,
    )


def pick_build(available: Iterable[str], spec: str, toolkit: str) -> str | None:
    """The newest release satisfying `spec` that has a build for the toolkit's CUDA major,
    and of its builds the newest not newer than the toolkit, else the newest of the major
    (a release built for +cuda12.8 and +cuda12.9: 12.8 for a 12.8 toolkit, 12.9 for 12.9
    and 12.4 alike; +cuda13.0 for 13.0)."""
    fitting = [v for v in builds_for_major(available, toolkit) if satisfies(v, spec)]
    if not fitting:
        return None
    top = max((release_of(v) for v in fitting), key=debian_key)
    builds = sorted(
        (v for v in fitting if release_of(v) == top), key=lambda v: dotted_key(build_cuda(v) or "")
    )
    older = [v for v in builds if fits_toolkit(v, toolkit)]
    return (older or builds)[-1]
