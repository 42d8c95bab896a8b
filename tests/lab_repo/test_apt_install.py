"""Real apt installs from the lab repository, into a throwaway copy-on-write root.

Each step runs in a private mount namespace whose root is an overlayfs layer over the
machine's root (as the lab's hosts are); the upper directory keeps the step's changes,
so dpkg's database and the files are checked from outside, and the machine is untouched.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.lab_repo.conftest import ServedRepo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("apt-get") is None,
        reason="needs root, unshare and apt-get",
    ),
]

ENV = "DEBIAN_FRONTEND=noninteractive"


@dataclass
class Overlay:
    base: Path

    @property
    def upper(self) -> Path:
        return self.base / "upper"

    def run(self, script: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        merged, work = self.base / "merged", self.base / "work"
        (self.upper / "tmp").mkdir(parents=True, exist_ok=True)
        (self.upper / "tmp").chmod(0o1777)  # apt's sandbox user writes there
        (self.upper / "tmp/step.sh").write_text("set -e\n" + script + "\n")
        outer = " && ".join(
            [
                f"mount -t overlay overlay -o lowerdir=/,upperdir={self.upper},workdir={work} "
                f"{merged}",
                f"mount --rbind /proc {merged}/proc",
                f"mount --rbind /dev {merged}/dev",
                f"mount -t tmpfs tmpfs {merged}/run",
                f"exec chroot {merged} /bin/sh /tmp/step.sh",
            ]
        )
        proc = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", outer],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"step failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def installed(self) -> dict[str, str]:
        """dpkg's database in the layer, read from outside with dpkg-query."""
        admin = self.upper / "var/lib/dpkg"
        out = subprocess.run(
            ["dpkg-query", f"--admindir={admin}", "-W", "-f", "${Package} ${Version} ${Status}\n"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {
            line.split()[0]: line.split()[1]
            for line in out.splitlines()
            if line.endswith("install ok installed")
        }

    def file(self, path: str) -> Path:
        return self.upper / path.lstrip("/")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, served_repo: ServedRepo) -> Iterator[Overlay]:
    base = tmp_path_factory.mktemp("ovl")
    for d in ("upper", "work", "merged"):
        (base / d).mkdir()
    ov = Overlay(base)
    keyring = f"{served_repo.url}/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb"
    ov.run(
        "rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*\n"
        "python3 -c 'import sys, urllib.request; "
        'open("/tmp/kr.deb", "wb").write(urllib.request.urlopen(sys.argv[1]).read())\' '
        f"{shlex.quote(keyring)}\n"
        "dpkg -i /tmp/kr.deb\n"
        "apt-get update -q"
    )
    yield ov
    subprocess.run(["rm", "-rf", "--one-file-system", str(base)], check=False)


def _gpus(ov: Overlay, module: dict[str, object]) -> None:
    etc = ov.file("/etc/gpunode-lab")
    etc.mkdir(parents=True, exist_ok=True)
    doc = {
        "model": "H200",
        "name": "NVIDIA H200",
        "count": 2,
        "memory_mib": 143771,
        "power_limit_w": 700,
        "bus_ids": ["00000000:00:06.0", "00000000:00:07.0"],
        "uuids": [
            "GPU-4535bd70-a68d-8e9d-5e87-ae20fb0ab3da",
            "GPU-b04010c1-7166-6096-5d84-4ad10eafff39",
        ],
        "host": "lab-01",
    }
    (etc / "gpus.json").write_text(json.dumps(doc))
    (etc / "module.json").write_text(json.dumps(module))


def test_install_toolkit_nccl_and_driver(host: Overlay) -> None:
    host.run(
        f"{ENV} apt-get install -y -q cuda-toolkit-12-4 libnccl2=2.21.5-1+cuda12.4 nvidia-open-550"
    )
    have = host.installed()
    assert have["cuda-toolkit-12-4"] == "12.4.1-1"
    assert have["cuda-nvcc-12-4"] == "12.4.131-1"
    assert have["libnccl2"] == "2.21.5-1+cuda12.4"
    assert have["nvidia-open-550"] == "550.163.01-1"
    assert have["nvidia-driver-550-open"] == "550.163.01-0ubuntu1"
    assert have["libnvidia-compute-550"] == "550.163.01-0ubuntu1"
    assert "nvidia-dkms-550" not in have, "the open flavour excludes the proprietary one"
    assert not any(n.startswith("cuda-drivers") for n in have)
    assert os.readlink(host.file("/etc/alternatives/cuda")) == "/usr/local/cuda-12.4"
    assert host.file("/usr/share/gpunode-lab/driver-version").read_text() == "550.163.01 open\n"
    proc = host.run("readlink -f /usr/local/cuda; /usr/local/cuda/bin/nvcc --version")
    assert proc.stdout.splitlines()[0] == "/usr/local/cuda-12.4"
    assert "Cuda compilation tools, release 12.4, V12.4.131" in proc.stdout


def test_nvidia_smi_follows_the_kernel_module(host: Overlay) -> None:
    _gpus(host, {"loaded": False, "version": None, "flavor": None})
    proc = host.run("nvidia-smi", check=False)
    assert proc.returncode == 9
    assert proc.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate")

    _gpus(host, {"loaded": True, "version": "580.159.04", "flavor": "open"})
    proc = host.run("nvidia-smi", check=False)
    assert proc.returncode == 18
    assert proc.stdout == (
        "Failed to initialize NVML: Driver/library version mismatch\n"
        "NVML library version: 550.163\n"
    )

    _gpus(host, {"loaded": True, "version": "550.163.01", "flavor": "open"})
    proc = host.run("nvidia-smi")
    lines = proc.stdout.splitlines()
    assert "Driver Version: 550.163.01     CUDA Version: 12.4" in lines[2]
    assert lines[8].startswith("|   0  NVIDIA H200")
    assert lines[12].startswith("|   1  NVIDIA H200")
    assert "143771MiB" in lines[9]


def test_branch_switch_replaces_the_old_driver(host: Overlay) -> None:
    host.run(f"{ENV} apt-get install -y -q nvidia-open-570")
    have = host.installed()
    assert have["nvidia-open-570"] == "570.195.03-1"
    assert have["libnvidia-compute-570"] == "570.195.03-0ubuntu1"
    for old in ("nvidia-open-550", "nvidia-driver-550-open", "libnvidia-compute-550"):
        assert old not in have
    assert host.file("/usr/share/gpunode-lab/driver-version").read_text() == "570.195.03 open\n"
    # The kernel still runs 550 until a reboot: the new user space reports the mismatch.
    proc = host.run("nvidia-smi", check=False)
    assert proc.returncode == 18


def test_unversioned_branch_with_pinning(host: Overlay) -> None:
    host.run(f"{ENV} apt-get install -y -q nvidia-driver-pinning-590 nvidia-open")
    have = host.installed()
    assert have["nvidia-open"] == "590.44.01-1"
    assert have["libnvidia-compute"] == "590.44.01-0ubuntu1"
    assert "nvidia-open-570" not in have and "libnvidia-compute-570" not in have
    pin = host.file("/etc/apt/preferences.d/nvidia-driver-pinning-590").read_text()
    assert "Pin: version 590.*" in pin
    policy = host.run("apt-cache policy nvidia-open").stdout
    assert "1000" in policy


def test_cudnn_header_and_removal_of_the_toolkit_alternative(host: Overlay) -> None:
    host.run(
        f"{ENV} apt-get install -y -q libcudnn9-dev-cuda-12=9.14.0.64-1 "
        "libnccl-dev=2.21.5-1+cuda12.4"
    )
    header = host.file("/usr/include/x86_64-linux-gnu/cudnn_version_v9.h").read_text()
    assert "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 14\n#define CUDNN_PATCHLEVEL 0\n" in header
    nccl = host.file("/usr/include/nccl.h").read_text()
    assert "#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n#define NCCL_PATCH 5\n" in nccl
    host.run(f"{ENV} apt-get purge -y -q cuda-toolkit-12-4-config-common")
    assert "cuda-toolkit-12-4-config-common" not in host.installed()
    proc = host.run("update-alternatives --query cuda", check=False)
    assert proc.returncode != 0, "the cuda alternative goes with the last toolkit"


def test_the_machine_itself_is_untouched() -> None:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\n"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert not [p for p in out if p.startswith(("cuda-", "libnccl", "nvidia-", "libcudnn"))]
    assert not Path("/etc/gpunode-lab").exists()
    assert not Path("/usr/local/cuda-12.4").exists()
