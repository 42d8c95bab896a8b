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


def pending_fact(name: str) -> Check:
    """A check over a fact other code gathers: skipped while the facts have no `name`
    field; a truthy value is the evidence."""

    def check(i: Inputs) -> list[Hit]:
        value = i.optional_fact(name)
        return [Hit(str(value))] if value else []

    check.__name__ = f"pending_{name}"
    return check
