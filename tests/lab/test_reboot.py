"""Reboots: the session drops, sshd returns with a new boot_id, the driver module loads."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import until

pytestmark = pytest.mark.lab


def _boot_id(lab, host):
    return lab.run(host, "cat /proc/sys/kernel/random/boot_id").stdout.strip()


@pytest.mark.parametrize(
    "command", ["sudo reboot", "sudo shutdown -r now", "sudo systemctl reboot"]
)
def test_reboot_inside_drops_the_session_and_sshd_returns(lab_hosts, lab_fresh_host, command):
    host = lab_fresh_host
    before = _boot_id(lab_hosts, host)
    lab_hosts.run(host, "echo kept > /tmp/gpunode-lab-survives-reboot")
    # a long command in one session, the reboot in another
    long = subprocess.Popen(
        lab_hosts.ssh_argv(host, "sleep 60; echo finished"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    until(lambda: lab_hosts.run(host, "pgrep -xf 'sleep 60'", check=False).returncode == 0,
          10, "the long command runs")  # fmt: skip
    lab_id = lab_hosts.boot_id(host)
    t0 = time.monotonic()
    reboot = lab_hosts.run(host, command, check=False, timeout=30)
    assert reboot.returncode == 255  # the connection went away under it
    out, _ = long.communicate(timeout=30)
    assert long.returncode == 255 and "finished" not in out
    assert time.monotonic() - t0 < 10
    # refused for a moment, then back
    lab_hosts.wait_booted(host, lab_id, timeout=30)
    after = _boot_id(lab_hosts, host)
    assert after != before
    assert lab_hosts.run(host, "cat /tmp/gpunode-lab-survives-reboot").stdout.strip() == "kept"
    assert lab_hosts.run(host, "pgrep -c sleep", check=False).stdout.strip() == "0"


def test_reboot_from_the_cli(lab_hosts):
    host = lab_hosts.names[1]
    before = _boot_id(lab_hosts, host)
    lab_hosts.reboot(host)
    assert _boot_id(lab_hosts, host) != before


def test_rebooting_loads_the_installed_driver(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    kernel = lab_hosts.run(host, "uname -r").stdout.strip()
    state = json.loads(lab_hosts.run(host, "cat /etc/gpunode-lab/module.json").stdout)
    assert state == {"loaded": False, "version": None, "flavor": None, "kernel": kernel}
    assert lab_hosts.run(host, "test -e /sys/module/nvidia", check=False).returncode == 1
    assert lab_hosts.run(host, "test -e /proc/driver/nvidia", check=False).returncode == 1

    # what the driver packages install; the module loads at the next boot
    lab_hosts.sudo(
        host,
        "mkdir -p /usr/share/gpunode-lab && "
        "echo '580.159.04 open' > /usr/share/gpunode-lab/driver-version",
    )
    assert (
        json.loads(lab_hosts.run(host, "cat /etc/gpunode-lab/module.json").stdout)["loaded"]
        is False
    )
    # without a module DKMS built for the booting kernel, nothing loads
    lab_hosts.reboot_inside(host)
    state = json.loads(lab_hosts.run(host, "cat /etc/gpunode-lab/module.json").stdout)
    assert state["loaded"] is False
    lab_hosts.sudo(
        host,
        f"mkdir -p /lib/modules/{kernel}/updates/dkms && "
        f"echo stand-in > /lib/modules/{kernel}/updates/dkms/nvidia.ko",
    )
    lab_hosts.reboot_inside(host)
    state = json.loads(lab_hosts.run(host, "cat /etc/gpunode-lab/module.json").stdout)
    # an unsigned DKMS module, Secure Boot off: it loads, and the kernel says it is tainted
    taint = "nvidia: module verification failed: signature and/or required key missing"
    assert [m.startswith(taint) for m in state.pop("kmsg", [])] == [True]
    assert state == {"loaded": True, "version": "580.159.04", "flavor": "open", "kernel": kernel}
    assert lab_hosts.run(host, "cat /sys/module/nvidia/version").stdout == "580.159.04\n"
    nvrm = lab_hosts.run(host, "cat /proc/driver/nvidia/version").stdout
    assert nvrm.startswith("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  ")

    lab_hosts.sudo(host, "echo '550.127.05 proprietary' > /usr/share/gpunode-lab/driver-version")
    lab_hosts.reboot(host)
    nvrm = lab_hosts.run(host, "cat /proc/driver/nvidia/version").stdout
    assert nvrm.startswith("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  ")
