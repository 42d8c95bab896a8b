"""`gpunode facts`' views: each host's facts as an aligned table, or as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpunode.safetext import printable

if TYPE_CHECKING:
    from gpunode.facts.model import HostFacts
    from gpunode.hostpool import Outcome


def facts_json(outcomes: dict[str, Outcome[HostFacts]]) -> dict[str, Any]:
    """{"hosts": {name: {status, seconds, facts?, error?}}}."""
    doc: dict[str, Any] = {}
    for name, o in outcomes.items():
        entry: dict[str, Any] = {"status": o.state, "seconds": round(o.seconds, 3)}
        if o.value is not None:
            entry["facts"] = o.value.model_dump(mode="json")
        if o.error:
            entry["error"] = o.error
        doc[name] = entry
    return {"hosts": doc}


def facts_text(outcomes: dict[str, Outcome[HostFacts]]) -> str:
    """Every host's table (or why it has none)."""
    parts = []
    for name, o in outcomes.items():
        if o.value is not None:
            parts.append(render(name, o.value))
        elif o.hostkey_changed:
            parts.append(f"{name}: HOST KEY CHANGED: {o.error}\n")
        else:
            parts.append(f"{name}: {o.status.upper()}: {o.error}\n")
    return printable("\n".join(parts), lines=True)


def facts_summary(outcomes: dict[str, Outcome[HostFacts]]) -> str:
    n = len(outcomes)
    bad = sum(1 for o in outcomes.values() if o.status != "ok")
    hostkey = [name for name, o in outcomes.items() if o.hostkey_changed]
    others = bad - len(hostkey)
    return (
        f"{n - bad} of {n} host{'s' if n != 1 else ''} gathered"
        + (f"; host key changed on {', '.join(hostkey)}: refused" if hostkey else "")
        + (f"; {others} unreachable or failed" if others else "")
    )


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def render(name: str, f: HostFacts) -> str:
    """A host's facts as an aligned two-column table."""
    rows: list[tuple[str, str]] = [
        ("os", f"{f.os.pretty_name or f.os.id + ' ' + f.os.version_id} ({f.arch})"),
        ("kernel", f.kernel),
        ("secure boot", {True: "on", False: "off", None: "unknown (no EFI)"}[f.secure_boot]),
        ("dkms signing key", _mok(f)),
        ("boot id", f.boot_id),
        ("disk free", ", ".join(f"{d.path} {_gib(d.free_bytes)}" for d in f.disks) or "?"),
        ("pci gpus", ", ".join(f"{g.slot} [10de:{g.device_id}]" for g in f.pci_gpus) or "none"),
    ]
    m = f.module
    kn = f.kernels
    if kn.installed:
        rows.append(("kernels", ", ".join(
            k + (" (headers)" if k in kn.headers else " (no headers)") for k in kn.installed
        )))  # fmt: skip
    if kn.next_boot and kn.next_boot != f.kernel:
        rows.append(("next boot", f"{kn.next_boot} (installed, waiting for a reboot)"))
    for d in f.dkms:
        rows.append(("dkms", f"{d.module}/{d.version} {d.kernel or '-'}: {d.state}"))
    rows.append(("nvidia module", f"{m.version or '?'} ({m.flavor or '?'})" if m.loaded
                 else "not loaded"))  # fmt: skip
    if f.driver_mismatch:
        rows.append(("driver mismatch", f"{f.driver_mismatch}: reload the module or reboot"))
    if m.nouveau_loaded:
        rows.append(("nouveau", "loaded"))
    if f.smi.ok:
        rows.append(("nvidia-smi", f"driver {f.smi.driver_version}, CUDA {f.smi.cuda_version}"))
        for g in f.smi.gpus:
            persistence = {True: "on", False: "off", None: "?"}[g.persistence_mode]
            rows.append((f"  gpu {g.index}", f"{g.name} {g.memory_total_mib} MiB {g.bus_id} "
                         f"persistence {persistence}"))  # fmt: skip
    else:
        rows.append(("nvidia-smi", f.smi.error or "unavailable"))
    if f.nvswitches:
        rows += _nvswitch_rows(f)
    rows.append(("gpu processes", "; ".join(p.shown() for p in f.gpu_processes) or "none"))
    installed = [p for p in f.packages.values() if p.installed]
    held = [p.name for p in installed if p.held]
    rows.append(("packages", f"{len(installed)} NVIDIA/CUDA installed"
                 + (f", held: {' '.join(held)}" if held else "")))  # fmt: skip
    for p in sorted(installed, key=lambda p: p.name):
        if p.name.startswith(
            (
                "nvidia-driver",
                "cuda-toolkit-",
                "libcudnn",
                "libnccl",
                "cuda-keyring",
                "nvidia-open",
                "cuda-drivers",
            )
        ):
            rows.append(("  " + p.name, p.version + (" (held)" if p.held else "")))
    for s in f.apt_sources:
        rows.append(("apt source", f"{s.uri} {s.suite} ({s.path})"))
    rows.append(("keyrings", " ".join(f.keyrings) or "none"))
    rows.append(("toolkits", ", ".join(f"{t.version}" + (f" (nvcc {t.nvcc})" if t.nvcc else "")
                                       for t in f.toolkits) or "none"))  # fmt: skip
    rows.append(("cuda ->", f.cuda_alternative or "none"))
    rows.append(("cudnn", f.cudnn_version or "none"))
    rows.append(("nccl", f.nccl_version or "none"))
    if f.conda.prefix:
        rows.append(("conda", f"{f.conda.prefix} {f.conda.version or ''}".strip()))
        for e in f.conda.envs:
            rows.append((f"  env {e.name}", f"python {e.python or '?'} torch {e.torch or '-'} "
                         f"tensorflow {e.tensorflow or '-'}"))  # fmt: skip
    else:
        rows.append(("conda", "none"))
    if f.dpkg_lock_holder:
        rows.append(("dpkg lock", f.dpkg_lock_holder))
    if f.dpkg_interrupted:
        half = ", ".join(f"{n} {st}" for n, st in sorted(f.dpkg_broken.items()))
        rows.append(("dpkg", "interrupted" + (f" ({half})" if half else "")
                     + ": the next apply finishes it"))  # fmt: skip
    for err in f.errors:
        rows.append(("parse error", err))
    width = max(len(k) for k, _ in rows)
    body = "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)
    return f"{name}: gathered in {f.gather_seconds:.2f}s\n{body}\n"


def _nvswitch_rows(f: HostFacts) -> list[tuple[str, str]]:
    """NVSwitches, each GPU's fabric state and the fabric manager beside the module."""
    states: dict[str, int] = {}
    for g in f.fabric.gpus:
        key = f"{g.state}, {g.status}"
        states[key] = states.get(key, 0) + 1
    fabric = "; ".join(f"{k} ({n} GPUs)" for k, n in states.items()) or f.fabric.error or "?"
    fm = f.fabricmanager
    if fm is None:
        manager = "not installed"
    else:
        manager = f"{fm.name} {fm.version}" + (" (held)" if fm.held else "")
        release = fm.version.split("-")[0]
        if f.module.version and release != f.module.version:
            manager += f": not the loaded module's release {f.module.version}"
    return [
        ("nvswitches", f"{len(f.nvswitches)}: " + ", ".join(s.slot for s in f.nvswitches)),
        ("fabric", fabric),
        ("fabric manager", manager),
    ]


def _mok(f: HostFacts) -> str:
    if not f.mok_key.present:
        return "none"
    return {True: "enrolled", False: "not enrolled", None: "present"}[f.mok_key.enrolled]
