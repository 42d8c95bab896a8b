"""The lab's repository, served by the supervisor, installs the driver inside one host only."""

from __future__ import annotations

import subprocess

import pytest

from gpunode_lab.state import net_address
from tests.conftest import TEST_LAB_NET

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_driver_install_from_the_lab_repo_then_reboot(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    base = lab_hosts.config["repo_url"]
    assert base.startswith(f"http://{net_address(TEST_LAB_NET, 10)}")
    keyring = f"{base}/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb"
    probe = lab_hosts.run(host, f"wget -q -O /tmp/k.deb {keyring}", check=False)
    if probe.returncode != 0:
        pytest.skip("the lab serves no repository yet (gpunode_lab.repo not built)")
    lab_hosts.sudo(host, "dpkg -i /tmp/k.deb >/dev/null && apt-get update -q >/dev/null")
    # with the running kernel's headers, which the lab's DKMS builds the module against
    lab_hosts.sudo(
        host, 'apt-get install -y -q nvidia-open-580 "linux-headers-$(uname -r)" >/dev/null'
    )
    out = lab_hosts.run(host, "dpkg-query -W -f '${Status}' nvidia-open-580")
    assert out.stdout == "install ok installed"
    assert subprocess.run(["dpkg-query", "-W", "nvidia-open-580"], capture_output=True).returncode
    other = lab_hosts.names[0]
    assert lab_hosts.run(other, "dpkg-query -W nvidia-open-580", check=False).returncode != 0

    smi = lab_hosts.run(host, "nvidia-smi", check=False)
    assert smi.returncode != 0 and "couldn't communicate with the NVIDIA driver" in smi.stdout
    lab_hosts.reboot_inside(host)
    listing = lab_hosts.run(host, "nvidia-smi -L").stdout.splitlines()
    assert len(listing) == 2 and listing[0].startswith("GPU 0: NVIDIA H200 (UUID: GPU-")
