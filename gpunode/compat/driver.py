"""What a driver branch means: its packages' names for its source and flavour (one
`DriverNames`), which of a repository's versions are its releases, the CUDA it runs, and
what refuses it. Every other module asks here; the driver role reads what resolve makes
of it (`DriverPin`), never the branch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpunode.compat.rules import (
    gpu_arch,
    known_toolkits,
    min_driver,
    minor,
    open_modules_supported,
    rules,
    torch_variants,
    variant_cuda,
)
from gpunode.inventory.model import Driver
from gpunode.versions import (
    compare_dotted,
    debian_key,
    dotted_key,
    matches_prefix,
    series,
    split_debian,
)

# The kernel-module packages of one branch (nvidia-open-550, nvidia-driver-550-server...).
_BRANCH_MODULE_PACKAGE = re.compile(r"nvidia-(?:open|driver)-\d+(?:-open|-server|-server-open)?")
_HELD = "(nvidia-open|cuda-drivers|nvidia-driver-pinning|libnvidia-compute)(-[0-9]+)?"
_FABRICMANAGER_HELD = "nvidia-fabricmanager(-[0-9]+)?"


@dataclass(frozen=True)
class DriverNames:
    """A driver spec as its repository names it: NVIDIA's packages for `source: nvidia`,
    Ubuntu's archive's for `source: ubuntu`. All that apt is told of a branch."""

    release: str
    """The package whose versions are the branch's releases (nvidia-open, nvidia-utils-580)."""
    userspace: str
    """The package whose installed version is the user-space driver (libcuda, nvidia-smi)."""
    install: tuple[str, ...]
    """What installs the driver, every one at the driver's release."""
    fabricmanager: str
    """NVSwitch systems' Fabric Manager, at exactly the driver's release."""
    held: str = _HELD
    """Held packages of any branch, a pattern: apt cannot switch branches while they are."""
    fabricmanager_held: str = _FABRICMANAGER_HELD
    """Held Fabric Manager packages of any branch: they block a switch of branches too."""
    modules_prefix: str | None = None
    """source: ubuntu: + "-<kernel>" names the signed modules Ubuntu built for a kernel."""
    pinning: str | None = None
    """590 on: the package that pins the branch (nvidia-driver-pinning-590). Its versions
    name the branch, not a release ("590-1", "610-2ubuntu1"): installed at any version."""

    def module(self, kernel: str) -> str:
        """source: ubuntu: the package of the signed modules Ubuntu built for `kernel`."""
        return f"{self.modules_prefix}-{kernel}"

    def modules(self, kernels: list[str], offered: Mapping[str, list[str]]) -> list[str]:
        """source: ubuntu: the signed modules for each kernel (running, next boot) that the
        archive has; the next boot's always (planning refuses the host when it lacks it)."""
        if self.modules_prefix is None:
            return []
        names = [self.module(k) for k in kernels]
        return [n for i, n in enumerate(names) if n in offered or i == len(names) - 1]


def driver_names(driver: Driver) -> DriverNames:
    """What `driver` is called, for its source, branch and flavour."""
    branch = driver.branch
    bare = unversioned(branch)
    fabricmanager = "nvidia-fabricmanager" if bare else f"nvidia-fabricmanager-{branch}"
    if driver.source == "ubuntu":
        names = rules()["ubuntu_driver"]
        main = names["headless"] if driver.headless else names["desktop"]
        tools = [_ubuntu_name(driver, t) for t in (main, *names["tools"])]
        return DriverNames(
            release=tools[1],  # nvidia-utils-<branch>
            userspace=tools[1],
            install=tuple(tools),
            fabricmanager=fabricmanager,
            modules_prefix=_ubuntu_name(driver, names["modules"]),
        )
    if bare:  # 590 on: a pinning package chooses the branch of unversioned packages
        meta = "nvidia-open" if driver.flavor == "open" else "cuda-drivers"
        install: tuple[str, ...] = (f"nvidia-driver-pinning-{branch}", meta)
    else:
        meta = f"nvidia-open-{branch}" if driver.flavor == "open" else f"cuda-drivers-{branch}"
        install = (meta,)
    userspace = "libnvidia-compute" if bare else f"libnvidia-compute-{branch}"
    return DriverNames(
        release=install[-1],
        userspace=userspace,
        install=(*install, userspace),
        fabricmanager=fabricmanager,
        pinning=install[0] if bare else None,
    )


def unversioned(branch: str) -> bool:
    """From this branch on, NVIDIA names driver packages without the branch."""
    return compare_dotted(branch, rules()["driver_unversioned_from"]) >= 0


def _ubuntu_name(driver: Driver, template: str) -> str:
    """One of rules.yaml's ubuntu_driver names, for the driver's branch and flavour."""
    branch = f"{driver.branch}-server" if driver.server else driver.branch
    return template.format(branch=branch, open="-open" if driver.flavor == "open" else "")


def ubuntu_modules_refusal(driver: Driver, kernel: str | None, offered: list[str]) -> str | None:
    """Ubuntu builds signed modules per kernel: none for the kernel that boots next, no
    driver after the reboot."""
    if kernel is None or offered:
        return None
    return (
        f"Ubuntu's archive (as this host's apt sees it) has no "
        f"{driver_names(driver).module(kernel)} for kernel {kernel}, the one it "
        "boots next: boot a kernel Ubuntu built signed NVIDIA modules for (apt-get update, "
        "then the newest linux-generic), or use driver source: nvidia (DKMS)"
    )


def wanted_release(driver: Driver) -> str:
    """The release the stack asks for: the pinned one, else its branch (a prefix)."""
    return driver.version or driver.branch


def in_branch(driver: Driver, release: str) -> bool:
    """Whether an upstream release ("550.163.01") is one of the driver's branch."""
    return matches_prefix(release, driver.branch)


def release_of(driver: Driver, version: str) -> str | None:
    """The release a Debian version of one of the driver's packages is, when it is one of
    the driver's branch: "580.95.05-0ubuntu1" -> "580.95.05" (and past Ubuntu's "1:"
    epoch); None for another branch's."""
    release = split_debian(version)[1]
    return release if in_branch(driver, release) else None


def releases(driver: Driver, versions: Iterable[str]) -> list[str]:
    """The releases of the driver's branch among a package's versions, oldest first."""
    return sorted({r for v in versions if (r := release_of(driver, v))}, key=debian_key)


def offered_branches(versions: Iterable[str]) -> list[str]:
    """The branches a package's versions are releases of, oldest first."""
    return series(versions, 1)


def release_installed(driver: Driver, installed: Mapping[str, str]) -> bool:
    """Whether an installed kernel-module package (name -> Debian version) is a release
    of what the stack wants."""
    wanted = wanted_release(driver)
    return any(
        _BRANCH_MODULE_PACKAGE.fullmatch(name) and matches_prefix(version.split("-")[0], wanted)
        for name, version in installed.items()
    )


def driver_cuda(driver: str | None) -> str | None:
    """The CUDA version a driver release supports, as nvidia-smi's header shows it."""
    if not driver:
        return None
    table: dict[str, str] = rules()["driver_cuda"]
    return table.get(driver.split(".")[0])


def branches() -> list[str]:
    """Driver branches whose CUDA support is known, oldest first."""
    return sorted(rules()["driver_cuda"], key=dotted_key)


def newest_toolkit_for(branch: str) -> str | None:
    ok = [c for c in known_toolkits() if driver_satisfies(branch, min_driver(c) or "0")]
    return ok[-1] if ok else None


def oldest_branch_for(cuda: str) -> str | None:
    needed = min_driver(cuda)
    if needed is None:
        return None
    return next((b for b in branches() if driver_satisfies(b, needed)), None)


def driver_satisfies(branch: str, needed: str, release: str | None = None) -> bool:
    """Whether a driver is >= `needed`: the exact `release` when one is pinned or installed,
    else the branch (its newest release is; which releases exist, the repository says)."""
    if release is not None:
        return compare_dotted(release, needed) >= 0
    return compare_dotted(branch, needed.split(".")[0]) >= 0


def torch_variant(
    torch: str, cuda: str | None, branch: str | None, release: str | None = None
) -> str | None:
    """The wheel variant for a host: the newest the driver can run, preferring the
    declared toolkit's CUDA and never newer than it when one is declared."""
    usable = [
        v
        for v in torch_variants(torch)
        if branch is None or driver_satisfies(branch, min_driver(variant_cuda(v)) or "0", release)
    ]
    if cuda is not None:
        same_major = [
            v
            for v in usable
            if variant_cuda(v).split(".")[0] == cuda.split(".")[0]
            and compare_dotted(variant_cuda(v), minor(cuda)) <= 0
        ]
        usable = same_major or usable
    return max(usable, key=lambda v: dotted_key(variant_cuda(v)), default=None)


def toolkit_problem(driver: Driver, cuda: str, needed: str) -> str | None:
    """Why the driver cannot run CUDA `cuda` (which needs driver >= `needed`), or None."""
    if driver_satisfies(driver.branch, needed, driver.version):
        return None
    fix = [f"use branch >= {oldest_branch_for(cuda)}"]
    newest = newest_toolkit_for(driver.branch)
    if newest:
        fix.append(f"CUDA <= {newest}")
    return (
        f"CUDA {cuda} needs driver >= {needed} but {driver.version or 'branch ' + driver.branch}"
        f" is requested: {', or '.join(fix)}"
    )


def flavor_problem(driver: Driver, gpu_model: str | None) -> str | None:
    """Why the driver's flavour cannot drive the declared GPU model, or None."""
    if driver.flavor != "open" or not gpu_model:
        return None
    if open_modules_supported(gpu_model) is not False:
        return None
    return (
        f"open kernel modules need Turing or newer, and {gpu_model} "
        f"is {gpu_arch(gpu_model)}: use flavor: proprietary"
    )


def secure_boot_refusal(driver: Driver, loaded: str | None, key_enrolled: bool) -> str | None:
    """With Secure Boot on, DKMS's modules load only when signed with an enrolled key."""
    if driver.source == "ubuntu" or key_enrolled:
        return None
    if loaded and matches_prefix(loaded, wanted_release(driver)):
        return None
    key = rules()["dkms_mok_key"]
    return (
        "Secure Boot is on and NVIDIA's repository builds the kernel module with DKMS, "
        f"signed with {key}, which shim has not enrolled: the module would not load. "
        "Either use Ubuntu's signed modules (stack.driver.source: ubuntu, no console needed); "
        "or create and enrol the key (sudo update-secureboot-policy --new-key; sudo "
        f"update-secureboot-policy --enroll-key, or sudo mokutil --import {key}; then "
        "reboot and confirm it in the MOK manager at the console) and apply again; "
        "or disable Secure Boot in the firmware"
    )
