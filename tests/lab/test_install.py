"""`gpunode lab install`: a host starts from older releases, through its own apt and dpkg."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _dpkg(lab, host, *names):
    out = lab.run(
        host,
        "dpkg-query -W -f '${Package} ${Version} ${Status}\\n' " + " ".join(names),
        check=False,
    )
    return {
        line.split()[0]: line.split()[1]
        for line in out.stdout.splitlines()
        if line.endswith(" ok installed")  # install or hold
    }


def test_an_older_driver_held_and_loaded_after_the_reboot(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    before = lab_hosts.boot_id(host)
    out = lab_hosts.cli("install", host, "nvidia-open-550=550.127.05-1", "--hold", "--reboot")
    assert "nvidia-open-550=550.127.05-1" in out.stdout
    assert lab_hosts.boot_id(host) != before

    have = _dpkg(
        lab_hosts,
        host,
        "nvidia-open-550",
        "nvidia-driver-550-open",
        "nvidia-dkms-550-open",
        "libnvidia-compute-550",
        "cuda-keyring",
    )
    assert have == {
        "nvidia-open-550": "550.127.05-1",
        "nvidia-driver-550-open": "550.127.05-0ubuntu1",
        "nvidia-dkms-550-open": "550.127.05-0ubuntu1",
        "libnvidia-compute-550": "550.127.05-0ubuntu1",
        "cuda-keyring": "1.1-1",
    }
    held = lab_hosts.run(host, "apt-mark showhold").stdout.split()
    assert held == ["nvidia-open-550"]
    status = lab_hosts.run(host, "dpkg-query -W -f '${Status}' nvidia-open-550").stdout
    assert status == "hold ok installed"
    # the repository has a newer 550 to move to; the host sits on the older one
    policy = lab_hosts.run(host, "apt-cache policy nvidia-open-550").stdout
    assert "Installed: 550.127.05-1" in policy and "Candidate: 550.163.01-1" in policy
    assert lab_hosts.run(host, "cat /sys/module/nvidia/version").stdout == "550.127.05\n"
    nvrm = lab_hosts.run(host, "cat /proc/driver/nvidia/version").stdout
    assert nvrm.startswith("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.127.05  ")
    smi = lab_hosts.run(host, "nvidia-smi").stdout
    assert "Driver Version: 550.127.05" in smi and "CUDA Version: 12.4" in smi


def test_downgrades_without_a_reboot_and_bad_versions_fail(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    before = lab_hosts.boot_id(host)
    lab_hosts.cli("install", host, "libnccl2=2.28.3-1+cuda13.0")
    assert _dpkg(lab_hosts, host, "libnccl2") == {"libnccl2": "2.28.3-1+cuda13.0"}
    lab_hosts.cli("install", host, "libnccl2=2.26.2-1+cuda12.8", "libnccl-dev=2.26.2-1+cuda12.8")
    assert _dpkg(lab_hosts, host, "libnccl2", "libnccl-dev") == {
        "libnccl2": "2.26.2-1+cuda12.8",
        "libnccl-dev": "2.26.2-1+cuda12.8",
    }
    assert lab_hosts.run(host, "apt-mark showhold").stdout == ""
    assert lab_hosts.boot_id(host) == before, "no reboot unless asked"
    assert lab_hosts.run(host, "test -e /sys/module/nvidia", check=False).returncode == 1

    bad = lab_hosts.cli("install", host, "libnccl2=9.9.9-1+cuda99.9", check=False)
    assert bad.returncode == 1
    assert "Version '9.9.9-1+cuda99.9' for 'libnccl2' was not found" in bad.stderr
    assert _dpkg(lab_hosts, host, "libnccl2") == {"libnccl2": "2.26.2-1+cuda12.8"}
    garbled = lab_hosts.cli("install", host, "libnccl2", check=False)
    assert garbled.returncode == 1 and "expected PKG=VERSION" in garbled.stderr
