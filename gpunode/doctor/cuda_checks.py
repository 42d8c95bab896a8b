"""The CUDA stack's checks: login shells, the dynamic linker, cuDNN/NCCL against the
default toolkit, toolkit and torch against the driver (compat's rules), disk space."""

from __future__ import annotations

import re

from gpunode.compat.driver import newest_toolkit_for, oldest_branch_for
from gpunode.compat.rules import min_driver, variant_cuda
from gpunode.doctor.inputs import Inputs
from gpunode.doctor.model import Hit
from gpunode.facts.model import Disk
from gpunode.versions import compare_dotted

GIB = 2**30
LOW_DISK = {"/boot": (100 * 2**20, 200 * 2**20)}
"""path -> (error below, warning below) free bytes; other paths: DEFAULT_LOW."""
DEFAULT_LOW = (1 * GIB, 8 * GIB)  # a toolkit's packages take about 8 GB (compat's rules)


def _login(i: Inputs, key: str) -> str | None:
    """A login shell's value of `key`; None when no login shell was read or no toolkit is
    installed (nothing to find then)."""
    if i.probe.login is None or not i.facts.toolkits:
        return None
    return i.probe.login.get(key, "")


def _env_fix(i: Inputs) -> str | None:
    """The fix when the inventory already asks for the CUDA environment (the rule's own says
    to set it): write it again, and read it from a login shell."""
    if not i.host.stack.cuda_env:
        return None
    return (
        "the inventory already sets `cuda_env: true`: gpunode apply INVENTORY --limit HOST "
        "writes /etc/profile.d/gpunode-cuda.sh and ld.so.conf.d again if they are missing or "
        "changed; then open a new login shell (`ssh host cmd` and cron run no login shell and "
        "read no /etc/profile.d)"
    )


def cuda_home_unset(i: Inputs) -> list[Hit]:
    if _login(i, "CUDA_HOME") != "":
        return []
    return [Hit("CUDA_HOME=  (a login shell's environment)", fix=_env_fix(i))]


def nvcc_not_on_path(i: Inputs) -> list[Hit]:
    path = _login(i, "PATH")
    if path is None or _login(i, "nvcc"):
        return []
    return [Hit(f"PATH={path}  (a login shell's: no nvcc)", fix=_env_fix(i))]


def _linked(i: Inputs, lib: str) -> bool:
    return any(line.startswith(lib) for line in i.probe.ldconfig or [])


def libs_not_found(i: Inputs) -> list[Hit]:
    if i.probe.ldconfig is None:
        return []
    hits = []
    fix = _env_fix(i)
    if i.facts.toolkits and not _linked(i, "libcudart.so"):
        hits.append(Hit("ldconfig -p: no libcudart.so", fix=fix,
                        title="cudart not found by the dynamic linker"))  # fmt: skip
    if i.facts.cudnn_version and not _linked(i, "libcudnn.so"):
        hits.append(Hit("ldconfig -p: no libcudnn.so", fix=fix,
                        title="cuDNN not found by the dynamic linker"))  # fmt: skip
    return hits


# cuDNN, NCCL and TensorRT's runtime libraries: one build per CUDA major
_CUDA_BUILT = re.compile(r"libcudnn\d+-cuda-\d+|libnccl2|libnvinfer\d+")


def _pkg_cuda_major(name: str, version: str) -> str | None:
    m = re.fullmatch(r"libcudnn\d+-cuda-(\d+)", name) or re.search(r"\+cuda(\d+)\.", version)
    return m.group(1) if m else None


def libs_other_cuda(i: Inputs) -> list[Hit]:
    cuda = i.default_toolkit
    if cuda is None:
        return []
    hits = []
    for name, pkg in sorted(i.facts.packages.items()):
        if not pkg.installed or not _CUDA_BUILT.fullmatch(name):
            continue
        major = _pkg_cuda_major(name, pkg.version)
        if major and major != cuda.split(".")[0]:
            title = f"{name} is built for CUDA {major}, the default toolkit is {cuda}"
            hits.append(Hit(f"{name}\t{pkg.version}\t{pkg.status}", title=title))
    return hits


def _driver_too_old(i: Inputs, cuda: str) -> str | None:
    """Why the running driver cannot run CUDA `cuda`, or None (also when unknown)."""
    release, needed = i.driver_release, min_driver(cuda)
    if not release or not needed or compare_dotted(release, needed) >= 0:
        return None
    branch = release.split(".")[0]
    newest = newest_toolkit_for(branch)
    return (f"declare a driver branch >= {oldest_branch_for(cuda)} (stack.driver.branch) and "
            f"run {i.fix_apply}" + (f", or use CUDA <= {newest}" if newest else ""))  # fmt: skip


def toolkit_newer_than_driver(i: Inputs) -> list[Hit]:
    cuda = i.default_toolkit
    fix = _driver_too_old(i, cuda) if cuda else None
    if not cuda or not fix:
        return []
    return [Hit(f"/usr/local/cuda -> {i.facts.cuda_alternative}; driver {i.driver_release} "
                f"(CUDA {cuda} needs >= {min_driver(cuda)})", fix=fix)]  # fmt: skip


def _torch_cuda(i: Inputs, path: str, torch: str | None) -> str | None:
    probed = i.probe.torch_cuda.get(path)
    if probed and re.fullmatch(r"\d+\.\d+", probed):
        return probed
    m = re.search(r"\+(cu\d{3})$", torch or "")
    return variant_cuda(m.group(1)) if m else None


def torch_newer_than_driver(i: Inputs) -> list[Hit]:
    hits = []
    for env in i.facts.conda.envs:
        cuda = _torch_cuda(i, env.path, env.torch)
        fix = _driver_too_old(i, cuda) if cuda else None
        if cuda and fix:
            hits.append(Hit(
                f"{env.name}: torch {env.torch} (CUDA {cuda}); driver {i.driver_release}",
                fix=fix + f"; or install a torch built for an older CUDA in {env.name}",
            ))  # fmt: skip
    return hits


def _low(d: Disk) -> Hit | None:
    err, warn = LOW_DISK.get(d.path, DEFAULT_LOW)
    if d.free_bytes >= warn:
        return None
    free, total = d.free_bytes / GIB, d.total_bytes / GIB
    return Hit(
        f"df {d.path}: {free:.2f} GiB free of {total:.2f} GiB",
        severity="error" if d.free_bytes < err else "warning",
    )


def disk_low(i: Inputs) -> list[Hit]:
    disks = {d.path: d for d in [*i.facts.disks, *i.probe.conda_disks]}
    return [hit for d in disks.values() if (hit := _low(d)) is not None]
