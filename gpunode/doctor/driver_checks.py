"""The driver's checks: the module, nouveau, DKMS, persistence mode."""

from __future__ import annotations

from collections.abc import Callable

from gpunode.doctor.inputs import Inputs
from gpunode.doctor.model import Hit
from gpunode.facts.model import DkmsModule

Check = Callable[[Inputs], list[Hit]]


def _wants_driver(i: Inputs) -> bool:
    f = i.facts
    return bool(i.host.stack.driver or f.pci_gpus or f.smi.driver_version or f.module.version)


def module_not_loaded(i: Inputs) -> list[Hit]:
    m = i.facts.module
    if m.loaded or not _wants_driver(i):
        return []
    # nvidia-smi's own words when it is installed and says why ("couldn't communicate...")
    smi = (i.facts.smi.error or "").splitlines()
    said = smi[0] if smi and "NVIDIA" in smi[0] else ""
    return [Hit(said or "/sys/module/nvidia: absent (module not loaded)")]


def nouveau_loaded(i: Inputs) -> list[Hit]:
    if not i.facts.module.nouveau_loaded:
        return []
    line = next((x for x in i.probe.kernel_log if "nouveau" in x), "")
    return [Hit(line or "/sys/module/nouveau: present (nouveau loaded)")]


def dkms_not_built(i: Inputs) -> list[Hit]:
    f = i.facts
    nvidia = [d for d in f.dkms if d.module == "nvidia"]
    if not nvidia:
        return []  # no DKMS-built driver (none, or prebuilt linux-modules-nvidia)
    versions = dict.fromkeys(d.version for d in nvidia)
    hits = []
    for kernel in f.dkms_kernels:
        if any(f.dkms_installed("nvidia", v, kernel) for v in versions):
            continue
        line = next((_line(d) for d in nvidia if d.kernel == kernel), None)
        running = kernel == f.kernel
        hits.append(
            Hit(
                line or f"dkms status: no nvidia line installed for {kernel}",
                fix=f"{i.fix_apply} (builds the module for {kernel}), or "
                f"`sudo dkms autoinstall -k {kernel}` and read its make.log",
                severity="error" if running else "warning",
                title=f"DKMS has not built nvidia for the {'running' if running else 'next'}"
                f" kernel {kernel}",
            )
        )
    return hits


def _line(d: DkmsModule) -> str:
    """The `dkms status` line the facts parsed."""
    return f"{d.module}/{d.version}, {d.kernel}, {d.arch}: {d.state}"


def persistence_off(i: Inputs) -> list[Hit]:
    hits = [
        Hit(q.line("Persistence Mode") + f"  (GPU {q.bus_id})")
        for q in i.probe.smi_q
        if q.get("Persistence Mode") == "Disabled"
    ]
    if hits or i.probe.smi_q:
        return hits
    return [
        Hit(f"GPU {g.index} ({g.bus_id}): persistence_mode Disabled")
        for g in i.facts.smi.gpus
        if g.persistence_mode is False
    ]


def library_mismatch(i: Inputs) -> list[Hit]:
    """The installed user space is not the loaded module's release (facts.driver_mismatch)."""
    why = i.facts.driver_mismatch
    return [Hit(f"{why} (dpkg's libnvidia-compute vs /sys/module/nvidia/version)")] if why else []


def secure_boot_unsigned(i: Inputs) -> list[Hit]:
    """Secure Boot on, a DKMS driver installed, its module not loaded, no enrolled key: the
    kernel refuses the unsigned module ("Key was rejected by service")."""
    f = i.facts
    dkms_driver = any(d.module == "nvidia" for d in f.dkms)
    if f.secure_boot is not True or f.module.loaded or not dkms_driver:
        return []
    if f.mok_key.present and f.mok_key.enrolled:
        return []
    key = "no DKMS signing key" if not f.mok_key.present else "its key is not enrolled"
    return [Hit(f"SecureBoot enabled (mokutil --sb-state); nvidia built by DKMS, {key}; "
                "the module is not loaded")]  # fmt: skip


def fabric_manager(i: Inputs) -> list[Hit]:
    """An NVSwitch board whose fabric manager is missing, of another release, or whose GPUs
    have not completed their fabric registration."""
    f = i.facts
    if not f.nvswitches:
        return []
    fm = f.fabricmanager
    if fm is None:
        return [Hit(f"{len(f.nvswitches)} NVSwitches on the bus, no nvidia-fabricmanager "
                    "package installed")]  # fmt: skip
    release = fm.version.split("-")[0]
    if f.module.version and release != f.module.version:
        return [Hit(f"{fm.name} {fm.version} installed, module {f.module.version} loaded")]
    if f.fabric.gpus and not f.fabric.completed:
        states = ", ".join(f"{g.bus_id}: {g.state}/{g.status}" for g in f.fabric.gpus[:4])
        return [Hit(f"fabric not completed: {states}")]
    return []
