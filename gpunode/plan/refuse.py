"""Reasons to refuse a host before planning anything for it."""

from __future__ import annotations

from gpunode.compat import check_host, toolkit_ubuntu
from gpunode.compat.rules import rules
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host
from gpunode.versions import matches_prefix

NVIDIA_RELEASES = ("20.04", "22.04", "24.04")


def refusal(host: Host, facts: HostFacts) -> str | None:
    stack = host.stack
    findings = check_host(host)
    if findings:
        return "; ".join(
            f"stack.{'.'.join(str(p) for p in f.loc[1:])}: {f.message}" for f in findings
        )
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
    if stack.driver and facts.secure_boot and not stack.vars.get("secure_boot_signed"):
        wanted = stack.driver.version or stack.driver.branch
        loaded = facts.module.version
        if not (loaded and matches_prefix(loaded, wanted)):
            return (
                "Secure Boot is on and NVIDIA's repository builds unsigned kernel modules "
                "(DKMS): disable Secure Boot, or enrol a MOK key for DKMS and set "
                "stack.vars.secure_boot_signed: true"
            )
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
