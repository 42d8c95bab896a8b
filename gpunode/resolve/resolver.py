"""Each host's version specs made exact: from what it has installed, else from the index
of the repository it uses. Installed versions that satisfy their spec are never touched,
so a converged host needs no index at all."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gpunode.compat import toolkit_package
from gpunode.compat.driver import (
    DriverNames,
    driver_names,
    in_branch,
    offered_branches,
    release_of,
    releases,
)
from gpunode.components import COMPONENTS, Component, repository
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Driver, Host
from gpunode.resolve.packages import (
    Catalog,
    Names,
    PackagePin,
    Unresolvable,
    names_for,
    resolve_package,
)
from gpunode.resolve.specs import newest
from gpunode.versions import debian_key


class Sizes(NamedTuple):
    """What one published version costs on disk: the index's Installed-Size (KiB, what dpkg
    unpacks) and Size (bytes of the .deb apt downloads); None where the index lacks it."""

    installed_kib: int | None
    download_bytes: int | None


class IndexUnavailable(Exception):
    """The repository's index cannot be read from here (the message says why)."""


class IndexNeeded(Unresolvable):
    """A spec needs the index and the controller cannot read it: the host's own apt can
    say which versions it offers (`names` are the packages to ask about)."""

    def __init__(self, message: str, names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.names = names


@dataclass(frozen=True, kw_only=True)
class DriverPin(PackagePin):
    """The driver's exact release and all that apt is told of it: the driver role reads
    this alone, never the branch. `version` is the upstream release ("580.95.05");
    `packages` every package at the release ("nvidia-open-580=580.95.05-*"), after
    Ubuntu's signed modules for each kernel (source: ubuntu)."""

    names: DriverNames
    """What the branch is called in its source's repository (gpunode.compat.driver)."""
    fabricmanager: str
    """NVSwitch systems' Fabric Manager, at the release."""
    preinstalled: bool = False
    """The release is loaded and answering but dpkg does not know it (the machine image or
    NVIDIA's .run installer put it there): it is taken as it is, since installing the
    repository's packages over it would replace working files."""

    @property
    def release(self) -> str:
        return self.version


@dataclass(frozen=True, kw_only=True)
class ToolkitPin(PackagePin):
    """A CUDA toolkit's exact release: `packages` is its cuda-toolkit-X-Y package alone (the
    `cuda` and `cuda-X-Y` meta packages pull in a driver)."""

    cuda: str
    """The toolkit as the inventory names it ("12.8")."""
    preinstalled: bool = False
    """/usr/local/cuda-X.Y has its nvcc and dpkg does not know the toolkit (NVIDIA's .run
    installer put it there): it is used as it is, and `version` is nvcc's release."""


PACKAGES = tuple(c for c in COMPONENTS if c.policy == "package")
"""The components of the one package policy (gpunode.resolve.packages)."""


@dataclass
class Resolved:
    driver: DriverPin | None = None
    toolkits: list[ToolkitPin] = field(default_factory=list)
    """Each of stack.cuda.toolkits' pins, in the inventory's order."""
    packages: dict[str, PackagePin] = field(default_factory=dict)
    """Each package component's pin, by its stack field."""
    notes: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> PackagePin | None:
        # roles read a package component's pin as `resolved.<field>`; None: not declared
        packages: dict[str, PackagePin] = self.__dict__.get("packages", {})
        if name in _PACKAGE_FIELDS:
            return packages.get(name)
        raise AttributeError(name)


_PACKAGE_FIELDS = frozenset(c.field for c in PACKAGES)


CatalogFor = Callable[[], Catalog]
"""Reads the host's repository index on first call (raises IndexUnavailable)."""


def resolve(
    host: Host,
    facts: HostFacts,
    catalog: CatalogFor | None,
    containers: CatalogFor | None = None,
) -> Resolved:
    """Exact versions for the host's driver and package components (cuDNN, NCCL, TensorRT,
    the container toolkit...), and that its toolkits exist; raises Unresolvable with what
    the repository offers instead. `catalog` reads NVIDIA's repository's index,
    `containers` the libnvidia-container repository's."""
    stack = host.stack
    out = Resolved()
    source = _Source(host, "nvidia", catalog, out.notes)
    sources = {"nvidia": source, "nvidia_container": _Source(
        host, "nvidia_container", containers, out.notes)}  # fmt: skip
    if stack.driver:
        # Ubuntu's archive: what the host's apt offers, read with the facts
        ubuntu = _from_apt(stack.driver, facts) if stack.driver.source == "ubuntu" else None
        release = _driver(host, facts, ubuntu or source, out.notes)
        out.driver = driver_pin(stack.driver, release, facts)
    toolkit = stack.cuda.default_toolkit if stack.cuda else None
    if stack.cuda:
        for cuda in stack.cuda.toolkits:
            tk = _toolkit(cuda, facts, source)
            out.toolkits.append(tk)
            out.notes.append(f"cuda {cuda}: {tk.version}, {tk.why}")
    for component, spec, names in _declared(host, toolkit):
        if names is None:  # the compatibility check reports it first
            raise Unresolvable(
                f"stack.{component.field}: {component.title} {spec.version} has no packages"
                f" for CUDA {toolkit}"
            )
        assert component.repository is not None
        pin = resolve_package(
            component, spec, names, toolkit if component.per_cuda_major else None, facts,
            sources[component.repository],
        )  # fmt: skip
        out.packages[component.field] = pin
        out.notes.append(f"{component.field}: {pin.version}, {pin.why}")
    return out


def _declared(host: Host, toolkit: str | None) -> Iterator[tuple[Component, Any, Names | None]]:
    """The package components the stack declares, with their packages' names; those built
    per CUDA major only with a default toolkit."""
    for component in PACKAGES:
        spec = getattr(host.stack, component.field)
        if spec and (toolkit or not component.per_cuda_major):
            yield component, spec, names_for(component, spec, toolkit)


class _Source:
    """A repository's index, read once and only when some spec needs it. Where it cannot be
    read from here, the host's apt is asked (IndexNeeded): the executor then gives each
    repository configured here the host's answer for its folder (resolve/hostapt.py)."""

    def __init__(self, host: Host, key: str, catalog: CatalogFor | None, notes: list[str]) -> None:
        self.host = host
        self.repository = repository(key)
        self.get = catalog
        self.notes = notes
        self.loaded: Catalog | None = None

    def __call__(self, field: str, need: str) -> Catalog:
        if self.loaded is not None:
            return self.loaded
        key, title = self.repository.key, self.repository.title
        if not getattr(self.host.repos, key):
            raise Unresolvable(
                f"{field}: {need}, and {title} is not managed here (repos.{key}: null):"
                f" install it from your own source, or set repos.{key}"
            )
        if self.get is None:
            raise Unresolvable(f"{field}: {need}, and no repository index was given to read")
        try:
            self.loaded = self.get()
        except IndexUnavailable as exc:
            raise IndexNeeded(
                f"{field}: {need}, and this machine cannot read the repository's index ({exc})",
                wanted_names(self.host),
            ) from None
        self.notes.append(f"versions from {self.loaded.where} ({self.loaded.how})")
        return self.loaded


class AptCatalog:
    """What the host's apt offers from Ubuntu's archive, as the facts read it
    (driver source: ubuntu; the NVIDIA repository plays no part)."""

    def __init__(self, offered: dict[str, list[str]]) -> None:
        self.offered = offered

    where = "Ubuntu's archive (the host's apt)"
    how = "apt-cache madison, with the facts"

    def versions(self, name: str) -> list[str]:
        return list(self.offered.get(name, []))

    def names(self) -> list[str]:
        return sorted(self.offered)


def _from_apt(driver: Driver, facts: HostFacts) -> Callable[[str, str], Catalog]:
    def source(field: str, need: str) -> Catalog:
        names = tuple(facts.apt_versions) or (driver_names(driver).release,)
        if not any(facts.apt_versions.values()):  # apt's lists are empty, or never fetched
            raise IndexNeeded(
                f"{field}: {need}, and the host's apt lists name no Ubuntu NVIDIA package yet",
                names,
            )
        return AptCatalog(facts.apt_versions)

    return source


def wanted_names(host: Host) -> tuple[str, ...]:
    """The packages whose versions the host's specs are resolved from."""
    stack = host.stack
    names: list[str] = []
    if stack.driver and stack.driver.source == "nvidia":
        d = driver_names(stack.driver)
        names += [d.release, d.userspace]
    toolkit = stack.cuda.default_toolkit if stack.cuda else None
    if stack.cuda:
        names += [toolkit_package(c) for c in stack.cuda.toolkits]
    names += [names.install[0] for _, _, names in _declared(host, toolkit) if names]
    return tuple(dict.fromkeys(names))


def _driver(
    host: Host, facts: HostFacts, source: Callable[[str, str], Catalog], notes: list[str]
) -> str:
    d = host.stack.driver
    assert d is not None
    meta = driver_names(d).release
    installed = installed_driver(host, facts)
    if d.version is not None:
        if installed == d.version:
            notes.append(f"driver: {d.version}, pinned, installed")
            return d.version
        cat = source("stack.driver.version", f"driver {d.version} is not installed")
        have = releases(d, cat.versions(meta))
        if d.version not in have:
            raise Unresolvable(
                f"stack.driver.version: {meta} {d.version} is not in {cat.where}: "
                + (f"it has {', '.join(have)}" if have else f"it has no release of {d.branch}")
            )
        notes.append(f"driver: {d.version}, pinned, in {cat.where}")
        return d.version
    if installed is not None and d.update == "keep":
        notes.append(f"driver: {installed}, installed, a release of branch {d.branch}")
        return installed
    need = f"no {d.branch} driver is installed" if installed is None else "update: latest"
    cat = source("stack.driver.branch", need)
    have = releases(d, cat.versions(meta))
    if not have:
        others = offered_branches(cat.versions(meta))
        raise Unresolvable(
            f"stack.driver.branch: no {meta} of branch {d.branch} in {cat.where}: "
            + (f"it has branches {', '.join(others)}" if others else f"it has no {meta}")
        )
    notes.append(f"driver: {have[-1]}, the newest {d.branch} in {cat.where}")
    return have[-1]


def driver_pin(driver: Driver, release: str, facts: HostFacts) -> DriverPin:
    """`release` as apt installs it. Ubuntu's modules package has the kernel's version (and
    depends on the release it was built for), so it goes unpinned."""
    names = driver_names(driver)

    def at(*packages: str) -> tuple[str, ...]:
        return tuple(p if p == names.pinning else f"{p}={release}-*" for p in packages)

    modules = names.modules(facts.dkms_kernels, facts.apt_versions)
    preinstalled = (
        facts.module.version == facts.smi.driver_version == release
        and facts.module.flavor == driver.flavor
        and facts.package(names.userspace) is None
    )
    packages = (*modules, *at(*names.install))
    return DriverPin(
        release,
        "installed" if preinstalled else f"a release of branch {driver.branch}",
        packages,
        names.install if driver.hold else (),
        names=names,
        fabricmanager=at(names.fabricmanager)[0],
        preinstalled=preinstalled,
    )


def installed_driver(host: Host, facts: HostFacts) -> str | None:
    """The release of the wanted branch this host has: its packaged user space, else a
    loaded module nvidia-smi agrees with (an image's or the .run installer's driver)."""
    d = host.stack.driver
    assert d is not None
    pkg = facts.package(driver_names(d).userspace)
    if pkg is not None and (release := release_of(d, pkg.version)):
        return release
    loaded = facts.module.version
    if loaded and in_branch(d, loaded) and facts.smi.driver_version == loaded:
        return loaded
    return None


def _toolkit(cuda: str, facts: HostFacts, source: _Source) -> ToolkitPin:
    """The installed release, else the newest the repository has: a toolkit's packages are
    built for its one CUDA release, so there is no spec to satisfy but its name."""
    name = toolkit_package(cuda)
    have = facts.package(name)
    if have is not None:
        return ToolkitPin(have.version, "installed", (name,), cuda=cuda)
    for t in facts.toolkits:
        if t.version == cuda and t.nvcc:
            why = f"in {t.path}, not from apt: used as it is"
            return ToolkitPin(t.nvcc, why, (name,), cuda=cuda, preinstalled=True)
    cat = source("stack.cuda.toolkits", f"CUDA {cuda} is not installed")
    best = newest(cat.versions(name))
    if best is None:
        prefix = "cuda-toolkit-"
        known = sorted(
            (
                n.removeprefix(prefix).replace("-", ".")
                for n in cat.names()
                if n.startswith(prefix) and n.removeprefix(prefix).replace("-", "").isdigit()
            ),
            key=debian_key,
        )
        raise Unresolvable(
            f"stack.cuda.toolkits: CUDA {cuda} ({name}) is not in {cat.where}"
            + (f": it has {', '.join(known)}" if known else "")
        )
    return ToolkitPin(best, f"the newest in {cat.where}", (name,), cuda=cuda)
