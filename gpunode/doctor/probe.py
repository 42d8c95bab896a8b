"""The doctor's one extra read of a host (probe.sh): the kernel's driver lines since this
boot, `nvidia-smi -q`, the dynamic linker's CUDA libraries, a login shell's CUDA variables,
each conda env's torch CUDA and the disk under conda; parsed into a `Probe`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from gpunode.doctor.smiq import SmiGpuQuery, parse_smi_q
from gpunode.facts.model import Disk

_SECTION = re.compile(r"^### ([a-z0-9.-]+)$", re.M)
_BOOT = re.compile(r"\bLinux version \d")
_NVRM = re.compile(r"\b(NVRM: .*|nouveau .*|.*fallen off the bus.*)$")


@dataclass
class Probe:
    """What the doctor reads beside the facts; a section not read leaves its field empty
    (or None where empty would say something)."""

    kernel_log: list[str] = field(default_factory=list)
    """The kernel's driver lines since this boot, each message once, as logged."""
    smi_rc: str | None = None  # "0", "9", "missing"
    smi_q: list[SmiGpuQuery] = field(default_factory=list)
    ldconfig: list[str] | None = None
    """`ldconfig -p`'s CUDA libraries; None: not read."""
    login: dict[str, str] | None = None  # CUDA_HOME, PATH, nvcc; None: no login shell read
    torch_cuda: dict[str, str] = field(default_factory=dict)  # env path -> "12.4" or "None"
    conda_disks: list[Disk] = field(default_factory=list)


@cache
def script() -> bytes:
    return resources.files("gpunode.doctor").joinpath("probe.sh").read_bytes()


def probe_command(conda_prefixes: Iterable[str] = ()) -> str:
    argv = ["sh", "-s", "--"]
    for prefix in conda_prefixes:
        argv += ["--conda", prefix]
    return shlex.join(argv)


def sections(text: str) -> dict[str, str]:
    parts = _SECTION.split(text)
    return {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}


def kernel_lines(text: str) -> list[str]:
    """dmesg's (or journald's) lines, then kern.log's since its last boot line; each
    message (the text from `NVRM:` on) once, the first line that carried it kept."""
    dmesg: list[str] = []
    klog: list[str] = []
    for line in text.splitlines():
        source, _, rest = line.partition(" ")
        (dmesg if source == "dmesg" else klog).append(rest)
    boots = [i for i, line in enumerate(klog) if _BOOT.search(line)]
    klog = klog[boots[-1] :] if boots else klog
    seen: set[str] = set()
    out = []
    for line in [*dmesg, *klog]:
        m = _NVRM.search(line)
        if m and m.group(1) not in seen:
            seen.add(m.group(1))
            out.append(line.strip())
    return out


def _smi(text: str) -> tuple[str | None, list[SmiGpuQuery]]:
    lines = text.splitlines()
    rc = lines[-1].removeprefix("rc=") if lines and lines[-1].startswith("rc=") else None
    return rc, parse_smi_q(text)


def _login(text: str) -> dict[str, str] | None:
    pairs = [line.split("=", 1) for line in text.splitlines() if "=" in line]
    return {k: v for k, v in pairs} or None


def _disks(text: str) -> list[Disk]:
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1].isdigit() and f[3].isdigit():
            out.append(Disk(path=" ".join(f[5:]), free_bytes=int(f[3]), total_bytes=int(f[1])))
    return out


def parse_probe(text: str) -> Probe:
    s = sections(text)
    rc, gpus = _smi(s.get("smi-q", ""))
    torch = dict(line.partition(" ")[::2] for line in s.get("torch-cuda", "").splitlines())
    return Probe(
        kernel_log=kernel_lines(s.get("kernel-log", "")),
        smi_rc=rc,
        smi_q=gpus,
        ldconfig=None
        if "ldconfig" not in s
        else [line.strip() for line in s["ldconfig"].splitlines() if line.strip()],
        login=_login(s.get("login-shell", "")),
        torch_cuda={k: v.strip().strip("'\"") for k, v in torch.items()},
        conda_disks=_disks(s.get("conda-disk", "")),
    )
