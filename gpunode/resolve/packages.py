"""One version policy for every package component (gpunode.components, policy `package`):
cuDNN, NCCL, TensorRT, the container toolkit, DCGM.

An installed version that satisfies the spec (and is a build for the default toolkit's CUDA,
where the component is built per CUDA major) is kept, unless `update: latest`; else the
newest such version the repository's index has. The driver and the toolkits resolve on
their own (gpunode.resolve.resolver), into the same `PackagePin`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from gpunode.compat import cudnn_names
from gpunode.compat.rules import tensorrt_packages
from gpunode.components import Component
from gpunode.facts.model import HostFacts
from gpunode.resolve.specs import (
    build_cuda,
    builds_for_major,
    fits_toolkit,
    newest,
    pick_build,
    satisfies,
)
from gpunode.versions import compare_debian, debian_key, series


@dataclass(frozen=True)
class PackagePin:
    """A component's exact version, why it is that one, and what apt is told of it."""

    version: str
    """The Debian version every package is installed at ("2.26.2-1+cuda12.8")."""
    why: str
    packages: tuple[str, ...]
    """What apt installs at `version`; the first is the package whose versions are the
    component's releases."""
    hold: tuple[str, ...] = ()
    """What apt-mark holds."""

    @property
    def name(self) -> str:
        return self.packages[0]


class Catalog(Protocol):
    """The versions one repository publishes, and a name for it in messages.

    A catalog over a fetched index has more, read with getattr (the host's `apt-cache`
    catalog has neither): `depends(name, version) -> str | None`, the raw Depends field,
    and `sizes(name, version) -> Sizes | None`."""

    @property
    def where(self) -> str: ...

    def versions(self, name: str) -> list[str]: ...

    def names(self) -> list[str]: ...

    @property
    def how(self) -> str: ...


Source = Callable[[str, str], Catalog]
"""(field, why the index is needed) -> the repository's catalog, read on first need."""


class Unresolvable(Exception):
    """A spec no version can satisfy; the message names the repository and what it has."""


class Names(NamedTuple):
    """A component's packages for one spec and toolkit: what apt installs (the first has
    the releases) and what it holds."""

    install: tuple[str, ...]
    hold: tuple[str, ...]


def names_for(component: Component, spec: Any, toolkit: str | None) -> Names | None:
    """What the component's packages are called for its inventory value `spec` (a model
    with `version` and `hold`) and the default toolkit; None where its naming rule has no
    packages for them (the compatibility check says so first)."""
    major = toolkit.split(".")[0] if toolkit else ""
    version: str = spec.version or ""
    if component.field == "cudnn":
        pair = cudnn_names(version, toolkit) if toolkit else None
        if pair is None:
            return None
        return Names(pair, pair[:1] if spec.hold else ())
    if component.field == "tensorrt":
        parts = tensorrt_packages(version, toolkit) if toolkit else None
        if parts is None:
            return None
        install = parts["runtime"] + parts["dev"] * spec.dev + parts["python"] * spec.python
        return Names(tuple(install), tuple(parts["hold"]) if spec.hold else ())
    if component.per_cuda_major and not major:
        return None
    install = tuple(p.format(major=major) for p in component.packages)
    return Names(install, install if spec.hold else ())


def resolve_package(
    component: Component,
    spec: Any,
    names: Names,
    toolkit: str | None,
    facts: HostFacts,
    source: Source,
) -> PackagePin:
    """The component's version under the one policy (see the module's docstring)."""
    field = f"stack.{component.field}"
    wanted, update = spec.version or "", spec.update
    name = names.install[0]
    by_major = component.builds == "major" and toolkit is not None

    def fits(version: str) -> bool:
        if toolkit is None:
            return True
        if by_major:
            return bool(builds_for_major([version], toolkit))
        return fits_toolkit(version, toolkit)

    def pin(version: str, why: str) -> PackagePin:
        return PackagePin(version, why, names.install, names.hold)

    have = facts.package(name)
    mine = have is not None and fits(have.version)
    if have is not None and mine and update == "keep" and satisfies_spec(have.version, wanted):
        return pin(have.version, "installed")
    title = " ".join(p for p in (component.title, wanted) if p)
    cuda = f" for CUDA {toolkit}" if toolkit else ""
    need = "update: latest" if mine and update == "latest" else f"{title}{cuda} is not installed"
    cat = source(field, need)
    offered = cat.versions(name)
    if by_major:
        assert toolkit is not None
        best = pick_build(offered, wanted, toolkit)
    else:
        best = newest(v for v in offered if satisfies_spec(v, wanted) and fits(v))
    if best is None:
        raise Unresolvable(_missing(component, title + cuda, name, offered, toolkit, cat.where))
    why = f"pinned, in {cat.where}" if wanted == best else f"the newest {wanted} in {cat.where}"
    why = why.replace("newest  in", "newest in")
    if build_cuda(best):
        why += f" (built for CUDA {build_cuda(best)})"
    if have is not None:
        move = "downgrade" if compare_debian(best, have.version) < 0 else "upgrade"
        why += f"; {move} from {have.version}"
    return pin(best, why)


def satisfies_spec(version: str, spec: str) -> bool:
    """No spec admits any version."""
    return not spec or satisfies(version, spec)


def _missing(
    component: Component,
    wanted: str,
    name: str,
    offered: list[str],
    toolkit: str | None,
    where: str,
) -> str:
    """What the index has instead, and the spec to write for its newest."""
    field = f"stack.{component.field}"
    if toolkit is None:
        fitting = sorted(offered, key=debian_key)
        has = f"it has {', '.join(series(offered, 2))}" if offered else f"it has no {name}"
    else:
        major = toolkit.split(".")[0]
        if component.builds == "major":
            fitting = builds_for_major(offered, toolkit)
            wanted += f" (a +cuda{major}.x build of {name})"
        else:
            fitting = sorted((v for v in offered if fits_toolkit(v, toolkit)), key=debian_key)
        others = sorted({c for v in offered if (c := build_cuda(v))}, key=debian_key)
        if fitting:
            has = f"it has {', '.join(fitting)}"
        elif component.builds == "major":
            has = f"it has no build for CUDA {major}" + (
                f" (builds for CUDA {', '.join(others)})" if others else f" (no {name} at all)"
            )
        else:
            has = "none fits"
    advice = series(fitting, 1)[-1:] if component.named_by_major else []
    advice += series(fitting, 2)[-1:]
    use = " or ".join(f'"{s}"' for s in advice)
    return f"{field}: {wanted} is not in {where}: {has}" + (
        f". Use {component.versioned}: {use}" if use else ""
    )
