"""Where a lab keeps its state, and the lab's recorded configuration."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_DIR = "/var/lib/gpunode-lab"
UBUNTU = {"22.04": "jammy", "24.04": "noble"}
FIRST_HOST_OCTET = 11
REPO_OCTET = 10
MIRRORS = ("full", "lagging", "mid-sync")  # the repository kinds a lab serves (gpunode_lab/repo)


def state_dir() -> Path:
    return Path(os.environ.get("GPUNODE_LAB_DIR") or DEFAULT_DIR)


def net_address(net: int, octet: int) -> str:
    """Address `octet` of a lab's `--net`: 127.0.NET.X, or 127.(NET // 256).(NET % 256).X from
    256 on (all of 127/8 is loopback), so parallel test sessions each have networks apart."""
    return f"127.{net // 256}.{net % 256}.{octet}"


@dataclass
class LabConfig:
    hosts: int
    gpus: int
    model: str
    ubuntu: str
    net: int = 0  # the lab's loopback /24: 127.<net // 256>.<net % 256>.X (127.0.<net>.X below 256)
    port: int = 22
    sudo_password_env: str | None = None
    mirror: str = "full"  # what the repository serves: full, or lagging behind NVIDIA
    slurm: bool = False  # munge, slurmctld and a slurmd per host (gpunode_lab/slurm.py)
    repo_port: int = 80
    repo_url: str = ""
    repo_dir: str = ""
    names: list[str] = field(default_factory=list)

    def address(self, index: int) -> str:
        return net_address(self.net, FIRST_HOST_OCTET + index)

    @property
    def repo_address(self) -> str:
        return net_address(self.net, REPO_OCTET)

    def host_address(self, name: str) -> str:
        return self.address(self.names.index(name))

    def same_shape(self, other: LabConfig) -> bool:
        keys = (
            "hosts",
            "gpus",
            "model",
            "ubuntu",
            "net",
            "port",
            "sudo_password_env",
            "mirror",
            "slurm",
        )
        return all(getattr(self, k) == getattr(other, k) for k in keys)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LabConfig:
        data: dict[str, Any] = json.loads(text)
        return cls(**data)


def host_names(count: int) -> list[str]:
    width = max(2, len(str(count)))
    return [f"lab-{i + 1:0{width}d}" for i in range(count)]


@dataclass(frozen=True)
class LabPaths:
    """Everything under the state dir. Mutable host data lives on a tmpfs at disk/."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "lab.json"

    @property
    def pidfile(self) -> Path:
        return self.root / "supervisor.pid"

    @property
    def log(self) -> Path:
        return self.root / "supervisor.log"

    @property
    def repo_access_log(self) -> Path:
        """The lab repository's access log: one line per HTTP request."""
        return self.root / "repo-access.log"

    @property
    def socket(self) -> Path:
        return self.root / "supervisor.sock"

    @property
    def client(self) -> Path:
        return self.root / "client"

    @property
    def identity(self) -> Path:
        return self.client / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.client / "known_hosts"

    @property
    def disk(self) -> Path:
        return self.root / "disk"

    @property
    def base(self) -> Path:
        return self.disk / "base"

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    def host(self, name: str) -> HostPaths:
        return HostPaths(self.disk / "hosts" / name)

    def load_config(self) -> LabConfig | None:
        try:
            return LabConfig.from_json(self.config.read_text())
        except (OSError, ValueError, TypeError):
            return None


@dataclass(frozen=True)
class HostPaths:
    root: Path

    @property
    def upper(self) -> Path:
        return self.root / "upper"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def merged(self) -> Path:
        return self.root / "merged"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def ctl(self) -> Path:
        """Files the supervisor and the host's init share: boot spec, boot_id."""
        return self.root / "ctl"

    @property
    def faults(self) -> Path:
        return self.root / "faults.json"

    @property
    def log(self) -> Path:
        return self.root / "init.log"

    def load_faults(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.faults.read_text())
            return data
        except (OSError, ValueError):
            return {}

    def save_faults(self, faults: dict[str, Any]) -> None:
        tmp = self.faults.with_suffix(".tmp")
        tmp.write_text(json.dumps(faults, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.faults)
