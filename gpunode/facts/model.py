"""HostFacts: what a host has, as parsed from one round trip.

This is the contract between fact gathering (gpunode.facts.gather/parse), the
planner and the views. Fields are plain data so that facts serialise to JSON
and back (`HostFacts.model_validate_json`) for fixtures and run records.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpunode.smiquery import SmiGpu

_USERSPACE = re.compile(r"libnvidia-compute(?:-[0-9]+)?")


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OsRelease(_Fact):
    id: str = ""  # "ubuntu"
    version_id: str = ""  # "24.04"
    codename: str = ""  # "noble"
    pretty_name: str = ""

    @property
    def repo_slug(self) -> str:
        """NVIDIA's repository folder for this release: ubuntu2404."""
        return f"{self.id}{self.version_id.replace('.', '')}"


class Disk(_Fact):
    path: str  # the mount point
    free_bytes: int
    total_bytes: int
    fstype: str = ""  # "ext4", "tmpfs"; empty from an older facts script


class PciGpu(_Fact):
    slot: str  # "0000:00:06.0" or "00:06.0"
    vendor_id: str = "10de"
    device_id: str = ""
    description: str = ""


class KernelModule(_Fact):
    loaded: bool = False
    version: str | None = None  # /sys/module/nvidia/version
    flavor: Literal["open", "proprietary"] | None = None  # from /proc/driver/nvidia/version
    nouveau_loaded: bool = False


class NvidiaSmi(_Fact):
    ok: bool = False
    error: str | None = None  # e.g. "NVIDIA-SMI has failed because it couldn't communicate..."
    driver_version: str | None = None
    cuda_version: str | None = None  # the highest CUDA the driver supports
    gpus: list[SmiGpu] = Field(default_factory=list)


class Package(_Fact):
    name: str
    version: str
    status: str = "install ok installed"  # dpkg's three words

    @property
    def held(self) -> bool:
        return self.status.startswith("hold")

    @property
    def installed(self) -> bool:
        return self.status.endswith("installed") and "not-installed" not in self.status


class AptSource(_Fact):
    path: str
    uri: str
    suite: str = ""
    signed_by: str | None = None


class CudaToolkit(_Fact):
    version: str  # "12.4" from /usr/local/cuda-12.4
    path: str
    nvcc: str | None = None  # full nvcc release, e.g. "12.4.131"


class CondaEnvFacts(_Fact):
    name: str
    path: str
    python: str | None = None
    torch: str | None = None  # "2.4.1+cu124"
    tensorflow: str | None = None


class Conda(_Fact):
    prefix: str | None = None
    version: str | None = None
    envs: list[CondaEnvFacts] = Field(default_factory=list)
    unsafe: dict[str, str] = Field(default_factory=dict)
    """Prefixes not used because a directory of theirs is not root's alone: prefix ->
    "UID MODE DIR" of the first such directory."""


class FileAttrs(_Fact):
    """Mode and owner of a managed file, as stat reports them."""

    mode: str  # octal without a leading zero: "644", "4755"
    owner: str  # names: "root:root"
    ids: str  # numbers: "0:0"


class GpuProcess(_Fact):
    """A process using the GPUs: a compute app nvidia-smi lists, or a holder of /dev/nvidia*."""

    pid: int
    name: str
    memory_mib: int | None = None  # None: not a compute app, or nvidia-smi says [N/A]

    def shown(self) -> str:
        mem = f", {self.memory_mib} MiB" if self.memory_mib is not None else ""
        return f"pid {self.pid} ({self.name}{mem})"


class DkmsModule(_Fact):
    """One line of `dkms status`: `nvidia/580.95.05, 6.8.0-45-generic, x86_64: installed`."""

    module: str
    version: str
    kernel: str | None = None  # None: added (sources registered) but not built for any
    arch: str | None = None
    state: str = ""  # added, built, installed (dkms may append a warning in parentheses)

    @property
    def installed(self) -> bool:
        return self.state.split(" ", 1)[0] == "installed"


class Kernels(_Fact):
    """The kernels a host has: installed, the one it boots next, those with headers."""

    # /lib/modules/<k> with /boot/vmlinuz-<k>, and the running kernel (a diskless host's too)
    installed: list[str] = Field(default_factory=list)
    next_boot: str | None = None  # where /boot/vmlinuz points (Ubuntu: the newest installed)
    headers: list[str] = Field(default_factory=list)  # /usr/src/linux-headers-<k> or .../build


class NvSwitch(_Fact):
    """An NVSwitch on the PCI bus (8-GPU HGX/DGX boards): `Bridge [0680]` in lspci."""

    slot: str  # "0000:07:00.0"
    device_id: str = ""  # "22a3"
    description: str = ""  # lspci's: "Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] ..."


class GpuFabric(_Fact):
    """One GPU's NVSwitch fabric registration, as nvidia-smi reports it."""

    bus_id: str
    state: str  # "Completed", "In Progress", "Not Started", "N/A" (no fabric)
    status: str  # "Success" once completed; "N/A" before


class Fabric(_Fact):
    """The fabric state of each GPU; read only on hosts with NVSwitches."""

    gpus: list[GpuFabric] = Field(default_factory=list)
    error: str | None = None  # nvidia-smi's answer when it could not say

    @property
    def completed(self) -> bool:
        """Every GPU registered with the fabric: what CUDA waits for on NVSwitch systems."""
        return bool(self.gpus) and all(
            (g.state, g.status) == ("Completed", "Success") for g in self.gpus
        )


class MokKey(_Fact):
    """The key DKMS signs modules with (/var/lib/shim-signed/mok/MOK.der) and whether shim
    trusts it (`mokutil --test-key`: "... is already enrolled", also while an import waits
    for the console's confirmation, as mokutil counts MokNew)."""

    present: bool = False
    enrolled: bool | None = None  # None: not asked (no key, no mokutil) or no clear answer


class ContainerFacts(_Fact):
    runtimes: list[str] = Field(default_factory=list)
    """Container runtimes on PATH: docker, containerd."""
    cdi_spec: bool = False
    """/etc/cdi/nvidia.yaml exists (and is readable)."""
    cdi_driver: str | None = None
    """The driver release the CDI spec was generated for (its libcuda.so.<release>)."""


JOURNAL_DIR = "/var/lib/gpunode/journal"
"""The step journal on the host: KEY.json (0644) for each change begun and not ended (its
run, title and commands, as `ps` shows them while they run), KEY.step (the command reached)
and KEY.N.in (0600, root's: the Nth command's stdin, which may hold a file's contents)."""


def journal_file(key: str, suffix: str) -> str:
    """A journal file's path: KEY.json, KEY.step, KEY.N.in (N from 1)."""
    return f"{JOURNAL_DIR}/{key}.{suffix}"


class JournalStep(_Fact):
    command: str
    stdin: bool = False
    """Fed on stdin when it ran: the host keeps that in KEY.N.in, readable by root only."""


class JournalEntry(_Fact):
    """A change begun on the host and not ended: the controller was killed, the connection
    was lost, or a command failed. The next apply runs it again, whole."""

    key: str = Field(pattern=r"^[0-9a-f]{16}$")
    run: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")
    role: str = Field(pattern=r"^[^\x00-\x1f\x7f]*$")
    task: str = Field(pattern=r"^[^\x00-\x1f\x7f]*$")
    op: str = Field(pattern=r"^[a-z0-9_]*$")
    steps: list[JournalStep] = Field(default_factory=list)
    reached: int = 1
    """The command (1-based) that had begun when it stopped."""
    apt: bool = False
    long_running: bool = False
    before_reboot: bool = False
    reload: str | None = None
    tags: list[str] = Field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.role}: {self.task}" if self.role else self.task

    def stdin_path(self, n: int) -> str:
        """Where the host keeps the stdin of the Nth command (from 1)."""
        return journal_file(self.key, f"{n}.in")


class HostFacts(_Fact):
    hostname: str = ""
    os: OsRelease = Field(default_factory=OsRelease)
    arch: str = ""  # dpkg --print-architecture: amd64
    kernel: str = ""
    secure_boot: bool | None = None  # None: unknown (no mokutil, not EFI)
    mok_key: MokKey = Field(default_factory=MokKey)
    boot_id: str = ""
    disks: list[Disk] = Field(default_factory=list)
    pci_gpus: list[PciGpu] = Field(default_factory=list)
    module: KernelModule = Field(default_factory=KernelModule)
    smi: NvidiaSmi = Field(default_factory=NvidiaSmi)
    packages: dict[str, Package] = Field(default_factory=dict)
    apt_sources: list[AptSource] = Field(default_factory=list)
    keyrings: list[str] = Field(default_factory=list)  # NVIDIA keyring files present
    toolkits: list[CudaToolkit] = Field(default_factory=list)
    cuda_alternative: str | None = None  # where /usr/local/cuda points
    cuda_alternative_mode: Literal["auto", "manual"] | None = None
    """dpkg's mode for it: in auto mode a toolkit's next install may move it."""
    cudnn_version: str | None = None  # "9.14.0"
    nccl_version: str | None = None  # "2.28.3"
    conda: Conda = Field(default_factory=Conda)
    dpkg_lock_holder: str | None = None  # "pid 1234 (unattended-upgr)"
    dpkg_interrupted: bool = False
    dpkg_broken: dict[str, str] = Field(default_factory=dict)
    """Packages dpkg left half-done, with their state ("unpacked", "half-configured")."""
    files: dict[str, str] = Field(default_factory=dict)
    """sha256 of files gpunode manages (profile.d, ld.so.conf.d, sources), for idempotence."""
    file_attrs: dict[str, FileAttrs] = Field(default_factory=dict)
    """Mode and owner of those files that exist."""
    gpu_processes: list[GpuProcess] = Field(default_factory=list)
    """Processes using the GPUs (nvidia-persistenced and nvidia-smi aside); /dev/nvidia*
    holders of other users are seen only when the login user is root."""
    kernels: Kernels = Field(default_factory=Kernels)
    dkms: list[DkmsModule] = Field(default_factory=list)
    """`dkms status`, line by line (empty without dkms)."""
    apt_versions: dict[str, list[str]] = Field(default_factory=dict)
    """Versions the host's apt offers (`apt-cache madison`) for the packages asked about:
    Ubuntu's driver packages, when the driver's source is ubuntu."""
    gpunode_holds: list[str] = Field(default_factory=list)
    """Packages gpunode held itself (/var/lib/gpunode/holds); other holds are the admin's."""
    journal: list[JournalEntry] = Field(default_factory=list)
    """Changes begun and not ended (JOURNAL_DIR): the next apply runs them again, whole."""
    nvswitches: list[NvSwitch] = Field(default_factory=list)
    """NVSwitches on the PCI bus: the host needs NVIDIA Fabric Manager."""
    fabric: Fabric = Field(default_factory=Fabric)
    """Each GPU's fabric state (hosts with NVSwitches only)."""
    containers: ContainerFacts = Field(default_factory=ContainerFacts)
    """Container runtimes installed and the CDI spec's driver (the container_toolkit role)."""
    errors: list[str] = Field(default_factory=list)
    """Sections the parser could not read, with why; never fatal."""
    gather_seconds: float = 0.0
    """How long the one round trip took (0 when parsed from a fixture)."""

    def package(self, name: str) -> Package | None:
        pkg = self.packages.get(name)
        return pkg if pkg is not None and pkg.installed else None

    @property
    def dkms_kernels(self) -> list[str]:
        """The kernels a DKMS module must be built for: the running one and, when another
        kernel is installed and waiting for a reboot, the one the next boot loads."""
        out = [self.kernel] if self.kernel else []
        nxt = self.kernels.next_boot
        return [*out, nxt] if nxt and nxt not in out else out

    def dkms_installed(self, module: str, version: str, kernel: str) -> bool:
        """Whether `dkms status` says module/version is installed for `kernel`."""
        return any(
            d.installed and (d.module, d.version, d.kernel) == (module, version, kernel)
            for d in self.dkms
        )

    @property
    def fabricmanager(self) -> Package | None:
        """The installed Fabric Manager package (nvidia-fabricmanager-580 or, from 590 on,
        nvidia-fabricmanager), whatever its branch."""
        found = [
            p
            for n, p in sorted(self.packages.items())
            if p.installed and re.fullmatch(r"nvidia-fabricmanager(-[0-9]+)?", n)
        ]
        return found[0] if found else None

    @property
    def driver_userspace(self) -> str | None:
        """The driver release of the installed user space (libnvidia-compute[-BRANCH], whose
        libnvidia-ml nvidia-smi loads), as dpkg has it: 580.95.05."""
        for name, pkg in sorted(self.packages.items()):
            if pkg.installed and _USERSPACE.fullmatch(name):
                return pkg.version.split(":")[-1].split("-")[0]
        return None

    @property
    def driver_mismatch(self) -> str | None:
        """Why NVML fails with "Driver/library version mismatch": the loaded module is not
        the installed user space's release (an upgrade replaced the user space under it)."""
        user = self.driver_userspace
        if not self.module.loaded or not self.module.version or not user:
            return None
        if self.module.version == user:
            return None
        return f"module {self.module.version} loaded, user space {user} installed"

    def free_bytes(self, path: str) -> int | None:
        best = self.disk(path)
        return best.free_bytes if best else None

    def disk(self, path: str) -> Disk | None:
        """The measured filesystem `path` lives on: the longest mount point above it."""
        best = None
        for d in self.disks:
            if (path == d.path or path.startswith(d.path.rstrip("/") + "/")) and (
                best is None or len(d.path) > len(best.path)
            ):
                best = d
        return best
