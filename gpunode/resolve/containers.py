"""The container toolkit's version: from the host's packages, else the libnvidia-container
repository's index, with the driver's semantics (an installed one that satisfies the spec
is kept unless `update: latest`; else the newest the index has)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpunode.resolve.specs import newest, pick, satisfies, series

if TYPE_CHECKING:
    from gpunode.facts.model import HostFacts
    from gpunode.inventory.model import Host
    from gpunode.resolve.resolver import CatalogFor

TOOLKIT = "nvidia-container-toolkit"
# installed together, at one version (nvidia-container-toolkit depends on each exactly)
PACKAGES = (TOOLKIT, "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1")  # fmt: skip


def resolve_toolkit(
    host: Host, facts: HostFacts, catalog: CatalogFor | None, notes: list[str]
) -> str:
    from gpunode.resolve.resolver import IndexUnavailable, Unresolvable

    c = host.stack.containers
    assert c is not None
    spec = c.version or ""
    have = facts.package(TOOLKIT)
    if have is not None and c.update == "keep" and (not spec or satisfies(have.version, spec)):
        notes.append(f"container toolkit: {have.version}, installed")
        return have.version
    wanted = f"{TOOLKIT} {spec}" if spec else TOOLKIT
    if have is None:
        need = f"{wanted} is not installed"
    elif c.update == "latest":
        need = "update: latest"
    else:
        need = f"{TOOLKIT} {have.version} is installed, {spec} wanted"
    if not host.repos.nvidia_container:
        raise Unresolvable(
            f"stack.containers: {need}, and the libnvidia-container repository is not managed"
            " here (repos.nvidia_container: null): install it from your own source"
        )
    if catalog is None:
        raise Unresolvable(f"stack.containers: {need}, and no repository index was given")
    try:
        cat = catalog()
    except IndexUnavailable as exc:
        raise Unresolvable(
            f"stack.containers: {need}, and the libnvidia-container index cannot be read"
            f" from here ({exc}): pin stack.containers.version to the installed one, or"
            " let this machine reach repos.nvidia_container"
        ) from None
    offered = cat.versions(TOOLKIT)
    best = pick(offered, spec) if spec else newest(offered)
    if best is None:
        has = ", ".join(series(offered, 2)) or f"no {TOOLKIT}"
        raise Unresolvable(
            f"stack.containers.version: {TOOLKIT} {spec} is not in {cat.where}: it has {has}"
        )
    why = "pinned" if "-" in spec else f"the newest {spec}".rstrip()
    notes.append(f"container toolkit: {best}, {why} in {cat.where}")
    return best
