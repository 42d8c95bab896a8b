"""The inventory's shape: what a lab admin declares, validated strictly.

Every model forbids unknown keys and coerces nothing: a version written as a
YAML number, or `yes` where a boolean belongs, is an error with a hint rather
than a silent surprise (an unquoted `cuda: 12.10` is the float 12.1).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

Version = Annotated[str, StringConstraints(pattern=r"^\d+(\.\d+)*$")]
"""A dotted numeric version written as a quoted string: "12.4", "550", "2.21"."""

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]

PackageSpec = Annotated[
    str, StringConstraints(pattern=r"^\d+(\.\d+)*(-[0-9A-Za-z][0-9A-Za-z.+~]*)?$")
]
"""A release series ("9", "9.10", "2.26": the newest of it when installing; any installed
one is kept) or a full Debian version ("9.14.0.64-1", "2.26.2-1+cuda12.8": exactly that)."""

Release = Annotated[str, StringConstraints(pattern=r"^\d+\.\d+(\.\d+)*$")]
"""One driver release, as NVIDIA numbers it: "550.163.01"."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class AptSettings(Strict):
    lock_timeout: Annotated[int, Field(ge=0, le=3600)] = 120
    """Seconds apt and dpkg wait for a dpkg lock another process holds, then fail naming it."""


class SshSettings(Strict):
    user: str = "ubuntu"
    port: Annotated[int, Field(ge=1, le=65535)] = 22
    identity_file: str | None = None
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    known_hosts_file: str = "~/.ssh/known_hosts"
    config_file: str | None = "~/.ssh/config"
    connect_timeout: Annotated[float, Field(gt=0)] = 10.0
    command_timeout: Annotated[float, Field(gt=0)] = 1800.0
    keepalive: Annotated[float, Field(ge=0)] = 15.0


class Repos(Strict):
    nvidia: str | None = "https://developer.download.nvidia.com/compute/cuda/repos"
    """NVIDIA's CUDA repository or a mirror of it; null where the packages come from
    elsewhere (a prepared image, an air-gapped site's own tooling)."""
    conda_installer: str = "https://repo.anaconda.com/miniconda/Miniconda3-latest-Linux-x86_64.sh"
    pytorch_index: str = "https://download.pytorch.org/whl"
    pypi_index: str | None = None


class Driver(Strict):
    branch: Version = "580"
    """Any release of this branch is acceptable: an installed one is kept, none installed
    gets the newest the repository has."""
    version: Release | None = None
    """One release exactly; it must belong to `branch` (set alone, it names the branch)."""
    update: Literal["keep", "latest"] = "keep"
    """latest: move an installed release to the newest of its branch in the repository."""
    flavor: Literal["open", "proprietary"] = "open"
    hold: bool = True

    @model_validator(mode="before")
    @classmethod
    def _branch_from_version(cls, data: object) -> object:
        if isinstance(data, dict) and "version" in data and "branch" not in data:
            version = data["version"]
            if isinstance(version, str):
                return {**data, "branch": version.split(".")[0]}
        return data

    @model_validator(mode="after")
    def _version_in_branch(self) -> Driver:
        if self.version is not None and self.version.split(".")[0] != self.branch:
            raise ValueError(
                f"version {self.version!r} is not a release of branch {self.branch!r}: "
                f'set branch: "{self.version.split(".")[0]}" too, or drop one of them'
            )
        if self.version is not None and self.update == "latest":
            raise ValueError("update: latest moves a branch; a pinned version cannot move")
        return self


class Cuda(Strict):
    toolkits: list[Version] = Field(default_factory=lambda: ["13.0"])
    default: Version | None = None

    @property
    def default_toolkit(self) -> str | None:
        return self.default or (self.toolkits[-1] if self.toolkits else None)


PipVersion = Annotated[
    str, StringConstraints(pattern=r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")
]
"""An exact release as PyPI numbers it: "1.26.4", "2.0.0rc1"."""


class CondaEnv(Strict):
    python: Version = "3.11"
    pytorch: Version | None = None
    tensorflow: Version | None = None
    packages: dict[Name, PipVersion] = Field(default_factory=dict)
    """More PyPI packages for the env, each at an exact version: {numpy: "1.26.4"}."""

    @property
    def pip_packages(self) -> list[dict[str, str]]:
        return [{"name": n, "version": v} for n, v in sorted(self.packages.items())]


class Conda(Strict):
    prefix: str = "/opt/conda"
    envs: dict[Name, CondaEnv] = Field(default_factory=dict)


class Gpus(Strict):
    """What the host is expected to have; used by checks and the smoke suite."""

    model: str | None = None
    count: Annotated[int, Field(ge=0)] | None = None


SmokeTest = Literal[
    "nvidia-smi",
    "cuda-vectoradd",
    "torch",
    "torch-matmul",
    "tensorflow",
    "nccl-allreduce",
]


class Stack(Strict):
    driver: Driver | None = None
    cuda: Cuda | None = None
    cudnn: PackageSpec | None = None
    nccl: PackageSpec | None = None
    cuda_env: bool = False
    conda: Conda | None = None
    smoke: list[SmokeTest] = Field(default_factory=list)
    roles: list[Name] = Field(default_factory=list)
    """Extra roles (built-in or from the inventory's own roles/ folder), run after the stack."""
    vars: dict[str, str | int | float | bool | list[str]] = Field(default_factory=dict)
    """Variables for the extra roles' templates."""


class Settings(Strict):
    """Everything that defaults, groups and hosts may set; later layers win."""

    connection: Literal["ssh", "local"] = "ssh"
    ssh: SshSettings = Field(default_factory=SshSettings)
    become: Literal["sudo", "none"] = "sudo"
    become_password_env: str | None = None
    """Name of an environment variable holding the sudo password (never the password)."""
    repos: Repos = Field(default_factory=Repos)
    apt: AptSettings = Field(default_factory=AptSettings)
    gpus: Gpus = Field(default_factory=Gpus)
    stack: Stack = Field(default_factory=Stack)


class HostEntry(Settings):
    address: str | None = None


class GroupEntry(Settings):
    hosts: dict[Name, HostEntry | None] = Field(default_factory=dict)


class Document(Strict):
    defaults: Settings = Field(default_factory=Settings)
    groups: dict[Name, GroupEntry | None] = Field(default_factory=dict)
    hosts: dict[Name, HostEntry | None] = Field(default_factory=dict)


class Host(HostEntry):
    """One host's merged desired state."""

    name: Name
    groups: list[str] = Field(default_factory=list)

    # Cross-field rules run on the merged host only: a layer may set half of a pair.
    @model_validator(mode="after")
    def _reachable(self) -> Host:
        if self.connection == "ssh" and not self.address:
            raise ValueError("an ssh host needs an address: set `address:` or `connection: local`")
        return self

    @field_validator("stack")
    @classmethod
    def _default_toolkit_is_installed(cls, stack: Stack) -> Stack:
        cuda = stack.cuda
        if cuda is not None and cuda.default is not None and cuda.default not in cuda.toolkits:
            raise ValueError(
                f"cuda.default {cuda.default!r} is not in cuda.toolkits {cuda.toolkits}: "
                "add it to toolkits or pick one of them"
            )
        return stack

    @property
    def target(self) -> str:
        return "localhost" if self.connection == "local" else f"{self.address}:{self.ssh.port}"
