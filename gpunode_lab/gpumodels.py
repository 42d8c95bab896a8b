"""The simulated GPUs: what each model looks like on the PCI bus and to nvidia-smi."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuModel:
    key: str
    name: str  # as nvidia-smi prints it
    pci_device: int
    pci_name: str  # as lspci prints it
    pci_class: int
    memory_mib: int
    power_limit_w: int


MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        GpuModel("H200", "NVIDIA H200", 0x2335, "GH100 [H200 SXM 141GB]", 0x030200, 143771, 700),
        GpuModel(
            "H100", "NVIDIA H100 80GB HBM3", 0x2330, "GH100 [H100 SXM5 80GB]", 0x030200, 81559, 700
        ),
        GpuModel(
            "A100", "NVIDIA A100-SXM4-40GB", 0x20B0, "GA100 [A100 SXM4 40GB]", 0x030200, 40960, 400
        ),
        GpuModel("L40S", "NVIDIA L40S", 0x26B9, "AD102GL [L40S]", 0x030200, 46068, 350),
        GpuModel(
            "RTX4090",
            "NVIDIA GeForce RTX 4090",
            0x2684,
            "AD102 [GeForce RTX 4090]",
            0x030000,
            24564,
            450,
        ),
    )
}

NVIDIA_VENDOR = 0x10DE


def bus_ids(count: int) -> list[str]:
    """nvidia-smi's bus ids, numbered like the real 2x H200 capture (00:06.0, 00:07.0, ...)."""
    return [f"00000000:00:{6 + i:02x}.0" for i in range(count)]


def gpus_document(model: GpuModel, count: int, host: str) -> dict[str, Any]:
    """The contents of /etc/gpunode-lab/gpus.json, stable for a given host name."""
    uuids = []
    for i in range(count):
        u = uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}.gpu{i}.gpunode-lab")
        uuids.append(f"GPU-{u}")
    return {
        "model": model.key,
        "name": model.name,
        "count": count,
        "memory_mib": model.memory_mib,
        "power_limit_w": model.power_limit_w,
        "pci_device_id": f"0x{model.pci_device:04x}",
        "bus_ids": bus_ids(count),
        "uuids": uuids,
        "host": host,
    }


def pci_devices(model: GpuModel, count: int) -> list[dict[str, str]]:
    """One entry per GPU: its sysfs directory name and the files in it."""
    out = []
    for bus in bus_ids(count):
        out.append(
            {
                "slot": bus[4:].lower(),  # sysfs uses a 4-digit domain: 0000:00:06.0
                "vendor": f"0x{NVIDIA_VENDOR:04x}",
                "device": f"0x{model.pci_device:04x}",
                "class": f"0x{model.pci_class:06x}",
                "label": model.pci_name,
            }
        )
    return out
