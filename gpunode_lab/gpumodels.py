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
        "nvswitches": model.spec.nvswitches,
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
    return out + nvswitch_devices(model)


# The NVSwitch of HGX H100/H200 boards as pci.ids names it.
NVSWITCH_DEVICE, NVSWITCH_NAME = 0x22A3, "GH100 [H100 NVSwitch]"


def nvswitch_devices(model: GpuModel) -> list[dict[str, str]]:
    """The board's NVSwitches: NVIDIA functions of class 0x0680 (Bridge), on buses of their
    own as on the real boards (0000:07:00.0 ...)."""
    return [
        {
            "slot": f"0000:{7 + i:02x}:00.0",
            "vendor": f"0x{NVIDIA_VENDOR:04x}",
            "device": f"0x{NVSWITCH_DEVICE:04x}",
            "class": "0x068000",
            "label": NVSWITCH_NAME,
        }
        for i in range(model.spec.nvswitches)
    ]
