"""What a driver branch means: NVIDIA's package names for it and its flavour, the CUDA it
runs, and what refuses it. Every other module asks here; roles ask through `compat.NAME`
in their templates (gpunode.compat.TEMPLATE_FUNCTIONS).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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
from gpunode.versions import compare_dotted, dotted_key, matches_prefix

# The kernel-module packages of one branch (nvidia-open-550, nvidia-driver-550-server...).
_BRANCH_MODULE_PACKAGE = re.compile(r"nvidia-(?:open|driver)-\d+(?:-open|-server|-server-open)?")


def unversioned(branch: str) -> bool:
    """From this branch on, NVIDIA names driver packages without the branch."""
    return compare_dotted(branch, rules()["driver_unversioned_from"]) >= 0


def driver_packages(branch: str, flavor: str) -> list[str]:
    """The packages that install a driver branch, in NVIDIA's naming for that branch."""
    if unversioned(branch):
        meta = "nvidia-open" if flavor == "open" else "cuda-drivers"
        return [f"nvidia-driver-pinning-{branch}", meta]
    return [f"nvidia-open-{branch}" if flavor == "open" else f"cuda-drivers-{branch}"]


def release_package(driver: Driver) -> str:
    """The package whose versions are the branch's releases in the repository."""
    if driver.source == "ubuntu":
        return userspace_package(driver)
    return driver_packages(driver.branch, driver.flavor)[-1]


def userspace_package(driver: Driver) -> str:
    """The package whose version is the installed user-space driver, for either source."""
    if driver.source == "ubuntu":
        return ubuntu_userspace_packages(driver)[1]  # nvidia-utils-<branch>
    return driver_userspace_package(driver.branch)


# --- Ubuntu's archive: signed, precompiled modules (driver.source: ubuntu) ---
def _ubuntu_name(driver: Driver, template: str) -> str:
    """One of rules.yaml's ubuntu_driver names, for the driver's branch and flavour."""
    branch = f"{driver.branch}-server" if driver.server else driver.branch
    return template.format(branch=branch, open="-open" if driver.flavor == "open" else "")


def ubuntu_modules_prefix(driver: Driver) -> str:
    """linux-modules-nvidia-570-server-open: + "-<kernel>" names the signed modules that
    Ubuntu built for one kernel."""
    return _ubuntu_name(driver, rules()["ubuntu_driver"]["modules"])


def ubuntu_modules_package(driver: Driver, kernel: str) -> str:
    return f"{ubuntu_modules_prefix(driver)}-{kernel}"


def ubuntu_modules_packages(
    driver: Driver, kernels: list[str], offered: Mapping[str, list[str]]
) -> list[str]:
    """The signed modules for each kernel (running, next boot) that the archive has; the
    next boot's always (planning refuses the host when the archive lacks it)."""
    names = [ubuntu_modules_package(driver, k) for k in kernels]
    return [n for i, n in enumerate(names) if n in offered or i == len(names) - 1]


def ubuntu_userspace_packages(driver: Driver) -> list[str]:
    """The user space without DKMS (headless), or the full driver, and the tools."""
    names = rules()["ubuntu_driver"]
    main = names["headless"] if driver.headless else names["desktop"]
    return [_ubuntu_name(driver, t) for t in (main, *names["tools"])]


def ubuntu_modules_refusal(driver: Driver, kernel: str | None, offered: list[str]) -> str | None:
    """Ubuntu builds signed modules per kernel: none for the kernel that boots next, no
    driver after the reboot."""
    if kernel is None or offered:
        return None
    return (
        f"Ubuntu's archive (as this host's apt sees it) has no "
        f"{ubuntu_modules_package(driver, kernel)} for kernel {kernel}, the one it boots next: "
        "boot a kernel Ubuntu built signed NVIDIA modules for (apt-get update, then the "
        "newest linux-generic), or use driver source: nvidia (DKMS)"
    )


def driver_userspace_package(branch: str) -> str:
    """The package whose version is the installed user-space driver (libcuda, nvidia-smi)."""
    return "libnvidia-compute" if unversioned(branch) else f"libnvidia-compute-{branch}"


def driver_replaced_pattern() -> str:
    """Held driver packages of any branch: apt cannot switch branches while they are held."""
    return "(nvidia-open|cuda-drivers|nvidia-driver-pinning|libnvidia-compute)(-[0-9]+)?"


def fabricmanager_package(branch: str) -> str:
    """NVSwitch systems' Fabric Manager for a branch: nvidia-fabricmanager-580, or
    nvidia-fabricmanager from the unversioned branches on. Its versions are the driver's
    releases (580.95.05-1) and it runs only beside a module of exactly its release."""
    return "nvidia-fabricmanager" if unversioned(branch) else f"nvidia-fabricmanager-{branch}"


def fabricmanager_replaced_pattern() -> str:
    """Held Fabric Manager packages of any branch: they block a switch of branches."""
    return "nvidia-fabricmanager(-[0-9]+)?"


def wanted_release(driver: Driver) -> str:
    """The release the stack asks for: the pinned one, else its branch (a prefix)."""
    return driver.version or driver.branch


def in_branch(driver: Driver, release: str) -> bool:
    """Whether an upstream release ("550.163.01") is one of the driver's branch."""
    return matches_prefix(release, driver.branch)


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
