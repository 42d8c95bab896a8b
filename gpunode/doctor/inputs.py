"""What every rule reads: the host as declared, its facts, the doctor's probe."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.doctor.probe import Probe
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host


@dataclass(frozen=True)
class Inputs:
    host: Host
    facts: HostFacts
    probe: Probe

    @property
    def driver_release(self) -> str | None:
        """The running driver: nvidia-smi's, else the loaded module's."""
        return self.facts.smi.driver_version or self.facts.module.version

    @property
    def default_toolkit(self) -> str | None:
        """The CUDA of /usr/local/cuda ("12.8"), None without one."""
        m = re.search(r"cuda-(\d+\.\d+)", self.facts.cuda_alternative or "")
        return m.group(1) if m else None

    @property
    def fix_apply(self) -> str:
        return f"gpunode apply INVENTORY --limit {self.host.name}"
