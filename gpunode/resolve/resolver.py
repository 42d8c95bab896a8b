"""Each host's version specs made exact: from what it has installed, else from the index
of the repository it uses. Installed versions that satisfy their spec are never touched,
so a converged host needs no index at all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from gpunode.compat import cudnn_names, toolkit_package
from gpunode.compat.driver import (
    DriverNames,
    driver_names,
    in_branch,
    offered_branches,
    release_of,
    releases,
)
from gpunode.compat.rules import tensorrt_packages
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Driver, Host, TensorRT
from gpunode.resolve.specs import (
    build_cuda,
    builds_for_major,
    fits_toolkit,
    newest,
    pick,
    pick_build,
    satisfies,
)
from gpunode.versions import compare_debian, debian_key, series


class Sizes(NamedTuple):
    """What one published version costs on disk: the index's Installed-Size (KiB, what dpkg
    unpacks) and Size (bytes of the .deb apt downloads); None where the index lacks it."""

    installed_kib: int | None
    download_bytes: int | None


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


class Unresolvable(Exception):
    """A spec no version can satisfy; the message names the repository and what it has."""


class IndexUnavailable(Exception):
    """The repository's index cannot be read from here (the message says why)."""


class IndexNeeded(Unresolvable):
    """A spec needs the index and the controller cannot read it: the host's own apt can
    say which versions it offers (`names` are the packages to ask about)."""

    def __init__(self, message: str, names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.names = names


@dataclass(frozen=True)
class Pin:
    """One exact version for a spec, and why it is that one."""

    name: str
    dev: str | None
    version: str
    why: str


@dataclass(frozen=True)
class TensorRTPin:
    """TensorRT's exact Debian version, why, and every package of its set to install at it."""

    version: str
    why: str
    packages: tuple[str, ...]
    hold: tuple[str, ...]


@dataclass(frozen=True)
class DriverPin:
    """The driver's exact release and all that apt is told of it: the driver role reads
    this alone, never the branch."""

    release: str
    """The upstream release, "580.95.05"."""
    names: DriverNames
    """What the branch is called in its source's repository (gpunode.compat.driver)."""
    packages: tuple[str, ...]
    """What apt installs: every package at the release ("nvidia-open-580=580.95.05-*"),
    after Ubuntu's signed modules for each kernel (source: ubuntu)."""
    fabricmanager: str
    """NVSwitch systems' Fabric Manager, at the release."""
    preinstalled: bool = False
    """The release is loaded and answering but dpkg does not know it (the machine image or
    NVIDIA's .run installer put it there): it is taken as it is, since installing the
    repository's packages over it would replace working files."""


@dataclass
class Resolved:
    driver: DriverPin | None = None
    cudnn: Pin | None = None
    nccl: Pin | None = None
    container_toolkit: str | None = None  # the Debian version, "1.17.8-1"
    tensorrt: TensorRTPin | None = None
    notes: list[str] = field(default_factory=list)


CatalogFor = Callable[[], Catalog]
"""Reads the host's repository index on first call (raises IndexUnavailable)."""


def resolve(
    host: Host,
    facts: HostFacts,
    catalog: CatalogFor | None,
    containers: CatalogFor | None = None,
) -> Resolved:
    """Exact versions for the host's driver, cuDNN, NCCL and container toolkit specs, and
    that its toolkits exist; raises Unresolvable with what the repository offers instead.
    `containers` reads the libnvidia-container repository's index."""
    stack = host.stack
    out = Resolved()
    source = _Source(host, catalog, out.notes)
    if stack.driver:
        # Ubuntu's archive: what the host's apt offers, read with the facts
        ubuntu = _from_apt(stack.driver, facts) if stack.driver.source == "ubuntu" else None
        release = _driver(host, facts, ubuntu or source, out.notes)
        out.driver = driver_pin(stack.driver, release, facts)
    toolkit = stack.cuda.default_toolkit if stack.cuda else None
    if stack.cuda:
        for cuda in stack.cuda.toolkits:
            _toolkit(cuda, facts, source)
    if stack.cudnn and toolkit:
        out.cudnn = _cudnn(stack.cudnn, toolkit, facts, source)
        out.notes.append(f"cudnn: {out.cudnn.version}, {out.cudnn.why}")
    if stack.nccl and toolkit:
        out.nccl = _nccl(stack.nccl, toolkit, facts, source)
        out.notes.append(f"nccl: {out.nccl.version}, {out.nccl.why}")
    if stack.containers:
        out.container_toolkit = _container_toolkit(host, facts, containers, out.notes)
    if stack.tensorrt and toolkit:
        out.tensorrt = _tensorrt(stack.tensorrt, toolkit, facts, source)
        out.notes.append(f"tensorrt: {out.tensorrt.version}, {out.tensorrt.why}")
    return out


class _Source:
    """The repository's index, read once and only when some spec needs it."""

    def __init__(self, host: Host, catalog: CatalogFor | None, notes: list[str]) -> None:
        self.host = host
        self.get = catalog
        self.notes = notes
        self.loaded: Catalog | None = None

    def __call__(self, field: str, need: str) -> Catalog:
        if self.loaded is not None:
            return self.loaded
        if not self.host.repos.nvidia:
            raise Unresolvable(
                f"{field}: {need}, and the NVIDIA repository is not managed here "
                "(repos.nvidia: null): install it from your own source, or set repos.nvidia"
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
    if stack.cudnn and toolkit and (pair := cudnn_names(stack.cudnn, toolkit)):
        names.append(pair[0])
    if stack.nccl:
        names.append("libnccl2")
    if stack.tensorrt and toolkit and (trt := tensorrt_packages(stack.tensorrt.version, toolkit)):
        names.append(trt["runtime"][0])
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
    return DriverPin(release, names, packages, at(names.fabricmanager)[0], preinstalled)


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


def _toolkit(cuda: str, facts: HostFacts, source: _Source) -> None:
    name = toolkit_package(cuda)
    if facts.package(name) or any(t.version == cuda and t.nvcc for t in facts.toolkits):
        return
    cat = source("stack.cuda.toolkits", f"CUDA {cuda} is not installed")
    if not cat.versions(name):
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


def _cudnn(spec: str, toolkit: str, facts: HostFacts, source: _Source) -> Pin:
    names = cudnn_names(spec, toolkit)
    if names is None:  # the compatibility check reports it first
        raise Unresolvable(f"stack.cudnn: cuDNN {spec} has no packages for CUDA {toolkit}")
    name, dev = names
    return _pin("stack.cudnn", "cuDNN", spec, name, dev, toolkit, facts, source, majors=True)


def _nccl(spec: str, toolkit: str, facts: HostFacts, source: _Source) -> Pin:
    return _pin("stack.nccl", "NCCL", spec, "libnccl2", "libnccl-dev", toolkit, facts, source)


def _pin(
    field: str,
    what: str,
    spec: str,
    name: str,
    dev: str,
    toolkit: str,
    facts: HostFacts,
    source: _Source,
    majors: bool = False,
) -> Pin:
    have = facts.package(name)
    if have is not None and satisfies(have.version, spec) and fits_toolkit(have.version, toolkit):
        return Pin(name, dev, have.version, "installed")
    cuda = f"CUDA {toolkit}"
    cat = source(field, f"{what} {spec} for {cuda} is not installed")
    offered = cat.versions(name)
    best = pick(offered, spec, toolkit)
    if best is None:
        fitting = [v for v in offered if fits_toolkit(v, toolkit)]
        advice = [*series(fitting, 1)[-1:]] if majors else []
        advice += series(fitting, 2)[-1:]
        use = " or ".join(f'"{s}"' for s in advice)
        raise Unresolvable(
            f"{field}: {what} {spec} for {cuda} is not in {cat.where}: "
            + (f"it has {', '.join(sorted(fitting, key=debian_key))}" if fitting else "none fits")
            + (f". Use {field.split('.')[-1]}: {use}" if use else "")
        )
    why = f"the newest {spec} in {cat.where}" if spec != best else f"pinned, in {cat.where}"
    if build_cuda(best):
        why += f" (built for CUDA {build_cuda(best)})"
    if have is not None:
        move = "downgrade" if compare_debian(best, have.version) < 0 else "upgrade"
        why += f"; {move} from {have.version}"
    return Pin(name, dev, best, why)


def _tensorrt(t: TensorRT, toolkit: str, facts: HostFacts, source: _Source) -> TensorRTPin:
    """TensorRT's version: the installed library if it satisfies the spec and is a build for
    the toolkit's CUDA major (unless `update: latest`), else the newest such build."""
    parts = tensorrt_packages(t.version, toolkit)
    if parts is None:  # the compatibility check reports it first
        raise Unresolvable(
            f"stack.tensorrt: TensorRT {t.version} has no packages for CUDA {toolkit}"
        )
    names = parts["runtime"] + parts["dev"] * t.dev + parts["python"] * t.python
    hold = tuple(parts["hold"]) if t.hold else ()
    lib = parts["runtime"][0]
    major = toolkit.split(".")[0]

    def pin(version: str, why: str) -> TensorRTPin:
        return TensorRTPin(version, why, tuple(names), hold)

    have = facts.package(lib)
    mine = have is not None and bool(builds_for_major([have.version], toolkit))
    if have is not None and mine and t.update == "keep" and satisfies(have.version, t.version):
        return pin(have.version, "installed")
    need = f"TensorRT {t.version} for CUDA {toolkit} is not installed"
    if have is not None and mine and t.update == "latest":
        need = "update: latest"
    cat = source("stack.tensorrt", need)
    offered = cat.versions(lib)
    best = pick_build(offered, t.version, toolkit)
    if best is None:
        fitting = builds_for_major(offered, toolkit)
        others = sorted({c for v in offered if (c := build_cuda(v))}, key=debian_key)
        has = (
            f"it has {', '.join(fitting)}"
            if fitting
            else f"it has no build for CUDA {major}"
            + (f" (builds for CUDA {', '.join(others)})" if others else f" (no {lib} at all)")
        )
        use = series(fitting, 2)[-1:]
        raise Unresolvable(
            f"stack.tensorrt: TensorRT {t.version} for CUDA {toolkit} (a +cuda{major}.x build"
            f" of {lib}) is not in {cat.where}: {has}"
            + (f'. Use tensorrt: "{use[0]}"' if use else "")
        )
    why = (
        f"the newest {t.version} in {cat.where}" if t.version != best else f"pinned, in {cat.where}"
    )
    why += f" (built for CUDA {build_cuda(best)})"
    if have is not None:
        move = "downgrade" if compare_debian(best, have.version) < 0 else "upgrade"
        why += f"; {move} from {have.version}"
    return pin(best, why)


CONTAINER_TOOLKIT = "nvidia-container-toolkit"


def _container_toolkit(
    host: Host, facts: HostFacts, catalog: CatalogFor | None, notes: list[str]
) -> str:
    """The container toolkit's version: the installed one that satisfies the spec unless
    `update: latest`, else the newest of the spec in the libnvidia-container index."""
    c = host.stack.containers
    assert c is not None
    spec = c.version or ""
    have = facts.package(CONTAINER_TOOLKIT)
    if have is not None and c.update == "keep" and (not spec or satisfies(have.version, spec)):
        notes.append(f"container toolkit: {have.version}, installed")
        return have.version
    wanted = f"{CONTAINER_TOOLKIT} {spec}" if spec else CONTAINER_TOOLKIT
    if have is None:
        need = f"{wanted} is not installed"
    elif c.update == "latest":
        need = "update: latest"
    else:
        need = f"{CONTAINER_TOOLKIT} {have.version} is installed, {spec} wanted"
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
    offered = cat.versions(CONTAINER_TOOLKIT)
    best = pick(offered, spec) if spec else newest(offered)
    if best is None:
        has = ", ".join(series(offered, 2)) or f"no {CONTAINER_TOOLKIT}"
        raise Unresolvable(
            f"stack.containers.version: {CONTAINER_TOOLKIT} {spec} is not in {cat.where}:"
            f" it has {has}"
        )
    why = "pinned" if "-" in spec else f"the newest {spec}".rstrip()
    notes.append(f"container toolkit: {best}, {why} in {cat.where}")
    return best
