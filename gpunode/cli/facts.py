"""`gpunode facts`: what each host has, gathered in one round trip per host."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from gpunode.cli.common import (
    become_password,
    inventory_argument,
    json_option,
    limit_option,
    load_selected,
)

if TYPE_CHECKING:
    from gpunode.facts.model import HostFacts

EXIT_UNREACHABLE = 4
EXIT_HOSTKEY = 5  # as gpunode.execute.result (not imported: `facts --help` stays light)


@click.command("facts")
@inventory_argument
@limit_option
@json_option
@click.option("-f", "--forks", default=10, show_default=True, type=click.IntRange(1, 256),
              help="Hosts to work on at once.")  # fmt: skip
@click.option("-K", "--ask-become-pass", is_flag=True,
              help="Prompt once for the sudo password (else become_password_env).")  # fmt: skip
def facts(inventory: str, limit: str | None, as_json: bool, forks: int,
          ask_become_pass: bool) -> None:  # fmt: skip
    """Gather what each host has: OS, GPUs, driver, packages, CUDA, cuDNN, NCCL, conda.

    Exit status: 0 every host gathered, 4 some host unreachable or failed, 5 a host's key
    changed (or is revoked; before 4), 2 bad input.
    """
    from gpunode.events import Bus
    from gpunode.facts.gather import gather_all
    from gpunode.transport.connect import take_become_passwords

    _, hosts = load_selected(inventory, limit)
    take_become_passwords(hosts)  # out of the environment before any child process starts
    password = become_password(hosts, ask_become_pass)
    outcomes = gather_all(hosts, bus=Bus(), forks=forks, become_password=password)
    bad = [o for o in outcomes.values() if o.status != "ok"]
    hostkey = [name for name, o in outcomes.items() if o.hostkey_changed]
    if as_json:
        doc: dict[str, Any] = {}
        for name, o in outcomes.items():
            entry: dict[str, Any] = {"status": o.state, "seconds": round(o.seconds, 3)}
            if o.value is not None:
                entry["facts"] = o.value.model_dump(mode="json")
            if o.error:
                entry["error"] = o.error
            doc[name] = entry
        click.echo(json.dumps({"hosts": doc}, indent=2))
    else:
        for name, o in outcomes.items():
            if o.value is not None:
                click.echo(render(name, o.value))
            elif o.hostkey_changed:
                click.echo(f"{name}: HOST KEY CHANGED: {o.error}\n")
            else:
                click.echo(f"{name}: {o.status.upper()}: {o.error}\n")
        n = len(outcomes)
        others = len(bad) - len(hostkey)
        click.echo(
            f"{n - len(bad)} of {n} host{'s' if n != 1 else ''} gathered"
            + (f"; host key changed on {', '.join(hostkey)}: refused" if hostkey else "")
            + (f"; {others} unreachable or failed" if others else ""),
            err=True,
        )
    sys.exit(EXIT_HOSTKEY if hostkey else EXIT_UNREACHABLE if bad else 0)


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def render(name: str, f: HostFacts) -> str:
    """A host's facts as an aligned two-column table."""
    rows: list[tuple[str, str]] = [
        ("os", f"{f.os.pretty_name or f.os.id + ' ' + f.os.version_id} ({f.arch})"),
        ("kernel", f.kernel),
        ("secure boot", {True: "on", False: "off", None: "unknown (no EFI)"}[f.secure_boot]),
        ("boot id", f.boot_id),
        ("disk free", ", ".join(f"{d.path} {_gib(d.free_bytes)}" for d in f.disks) or "?"),
        ("pci gpus", ", ".join(f"{g.slot} [10de:{g.device_id}]" for g in f.pci_gpus) or "none"),
    ]
    m = f.module
    rows.append(("nvidia module", f"{m.version or '?'} ({m.flavor or '?'})" if m.loaded
                 else "not loaded"))  # fmt: skip
    if m.nouveau_loaded:
        rows.append(("nouveau", "loaded"))
    if f.smi.ok:
        rows.append(("nvidia-smi", f"driver {f.smi.driver_version}, CUDA {f.smi.cuda_version}"))
        for g in f.smi.gpus:
            rows.append((f"  gpu {g.index}", f"{g.name} {g.memory_total_mib} MiB {g.bus_id}"))
    else:
        rows.append(("nvidia-smi", f.smi.error or "unavailable"))
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
        rows.append(("dpkg", "interrupted: run dpkg --configure -a"))
    for err in f.errors:
        rows.append(("parse error", err))
    width = max(len(k) for k, _ in rows)
    body = "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)
    return f"{name}: gathered in {f.gather_seconds:.2f}s\n{body}\n"
