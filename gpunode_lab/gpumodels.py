"""The simulated GPUs: what each model looks like on the PCI bus and to nvidia-smi."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from gpunode_lab.repo.smi_sim import MODELS as SMI_MODELS
from gpunode_lab.repo.smi_sim import Model


@dataclass(frozen=True)
class GpuModel:
    """A model of smi_sim's table under the key `gpunode lab up --model` takes."""

    key: str
    spec: Model

    @property
    def name(self) -> str:
        return self.spec.name


MODELS: dict[str, GpuModel] = {key: GpuModel(key, spec) for key, spec in SMI_MODELS.items()}

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
        "memory_mib": model.spec.memory_mib,
        "power_limit_w": model.spec.power_limit_w,
        "pci_device_id": f"0x{model.spec.pci_device:04x}",
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
                "device": f"0x{model.spec.pci_device:04x}",
                "class": f"0x{model.spec.pci_class:06x}",
                "label": model.spec.pci_name,
            }
        )
    return out
