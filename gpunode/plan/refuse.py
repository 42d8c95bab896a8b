"""Reasons to refuse a host before planning anything for it."""

from __future__ import annotations

from gpunode.compat import check_host, toolkit_ubuntu
from gpunode.compat.driver import (
    driver_names,
    release_installed,
    secure_boot_refusal,
    ubuntu_modules_refusal,
)
from gpunode.compat.paths import INITRAMFS_BYTES
from gpunode.compat.rules import rules
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host

NVIDIA_RELEASES = ("20.04", "22.04", "24.04")
# Without the index, free space below which a planned package change is refused: apt
# downloads every .deb into its archives before dpkg unpacks any (a driver and a toolkit are
# GBs), and a driver or kernel change writes a new initramfs into /boot.
ARCHIVES_MIN_BYTES = 1 << 30
BOOT_MIN_BYTES = INITRAMFS_BYTES


def refusal(host: Host, facts: HostFacts) -> str | None:
    stack = host.stack
    findings = check_host(host)
    if findings:
        # the field's whole path: a finding may be about gpus.model as well as the stack
        return "; ".join(f"{'.'.join(str(p) for p in f.loc)}: {f.message}" for f in findings)
    wants_nvidia = bool(stack.driver or stack.cuda or stack.cudnn or stack.nccl)
    os_ = facts.os
    if os_.id != "ubuntu":
        name = os_.pretty_name or os_.id or "an unknown OS"
        return f"unsupported OS: {name}; gpunode converges Ubuntu {', '.join(NVIDIA_RELEASES)}"
    if facts.arch and facts.arch != "amd64" and wants_nvidia:
        return f"unsupported architecture {facts.arch}: gpunode uses NVIDIA's x86_64 repository"
    toolkits = stack.cuda.toolkits if stack.cuda else []
    for cuda in toolkits:
        releases = toolkit_ubuntu(cuda)
        if os_.version_id not in releases:
            return (
                f"CUDA {cuda} has no repository for Ubuntu {os_.version_id} "
                f"(it has {', '.join(releases) or 'none'}): pick another toolkit or release"
            )
    if wants_nvidia and os_.version_id not in NVIDIA_RELEASES:
        return f"Ubuntu {os_.version_id} has no NVIDIA CUDA repository"
    if stack.driver and facts.secure_boot:
        # stack.vars.secure_boot_signed: the admin signs DKMS's modules another way
        enrolled = bool(facts.mok_key.enrolled or stack.vars.get("secure_boot_signed"))
        unsigned = secure_boot_refusal(stack.driver, facts.module.version, enrolled)
        if unsigned:
            return unsigned
    # an apt that lists nothing of Ubuntu's NVIDIA packages has not fetched its lists yet:
    # the apply refreshes them and asks again
    if stack.driver and stack.driver.source == "ubuntu" and any(facts.apt_versions.values()):
        kernel = facts.kernels.next_boot or facts.kernel or None
        name = driver_names(stack.driver).module(kernel) if kernel else ""
        no_modules = ubuntu_modules_refusal(stack.driver, kernel, facts.apt_versions.get(name, []))
        if no_modules and not facts.package(name):
            return no_modules
    missing = [c for c in toolkits if not any(t.version == c for t in facts.toolkits)]
    if missing:
        need = int(rules()["toolkit_disk_bytes"]) * len(missing)
        free = facts.free_bytes("/usr/local")
        if free is not None and free < need:
            return (
                f"too little disk for CUDA {', '.join(missing)}: {free / 1e9:.1f} GB free "
                f"under /usr/local, {need / 1e9:.1f} GB needed; free space or add a disk"
            )
    return None


def _driver_pending(host: Host, facts: HostFacts) -> bool:
    """The stack wants a driver that no installed driver package is a release of."""
    driver = host.stack.driver
    if not driver:
        return False
    installed = {name: pkg.version for name, pkg in facts.packages.items() if pkg.installed}
    return not release_installed(driver, installed)


def guessed_space_refusal(host: Host, facts: HostFacts) -> str | None:
    """Too little room where apt downloads or where the initramfs goes, for a package change
    that is sure to come: a conservative guess (no false refusals), for when the index that
    would say what the packages need cannot be read (gpunode.plan.space counts it)."""
    stack = host.stack
    toolkits = stack.cuda.toolkits if stack.cuda else []
    missing = [c for c in toolkits if not any(t.version == c for t in facts.toolkits)]
    driver = _driver_pending(host, facts)
    pending = [
        *(["the driver"] if driver else []),
        *(f"CUDA {c}" for c in missing),
        *(["cuDNN"] if stack.cudnn and not facts.cudnn_version else []),
        *(["NCCL"] if stack.nccl and not facts.nccl_version else []),
    ]
    if not pending:
        return None
    checks = [("/var/cache/apt/archives", ARCHIVES_MIN_BYTES, "apt's downloads")]
    if driver:
        checks.append(("/boot", BOOT_MIN_BYTES, "the initramfs"))
    for path, need, what in checks:
        free = facts.free_bytes(path)
        if free is not None and free < need:
            return (
                f"too little disk for {what}: {free >> 20} MiB free in {path}, "
                f"{need >> 20} MiB needed before installing {', '.join(pending)}; "
                "free space there (apt-get clean, old kernels) and apply again"
            )
    return None
