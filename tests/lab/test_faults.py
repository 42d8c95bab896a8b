"""Fault knobs make a lab host misbehave the way real machines do."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

pytestmark = pytest.mark.lab


def _connect(lab, host):
    return socket.create_connection((lab.addresses[host], lab.port), timeout=3)


def test_refuse_then_back(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "refuse")
    with pytest.raises(ConnectionRefusedError):
        _connect(lab_hosts, host).close()
    lab_hosts.fault(host, "refuse", off=True)
    lab_hosts.wait_up(host)


def test_stall_accepts_and_never_speaks(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "stall")
    with _connect(lab_hosts, host) as s:
        s.settimeout(1.5)
        with pytest.raises(TimeoutError):
            s.recv(64)
    lab_hosts.fault(host, "stall", off=True)
    lab_hosts.wait_up(host)


def test_refuse_survives_a_reboot(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "refuse")
    lab_hosts.reboot(host, ssh=False)  # booted again: a new boot id, state up
    with pytest.raises(ConnectionRefusedError):
        _connect(lab_hosts, host).close()
    lab_hosts.fault(host, "refuse", off=True)
    lab_hosts.wait_up(host)


def test_drop_cuts_a_running_command(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "drop", "1")
    t0 = time.monotonic()
    out = lab_hosts.run(host, "sleep 10; echo finished", check=False, timeout=30)
    assert out.returncode == 255 and "finished" not in out.stdout
    assert time.monotonic() - t0 < 6
    lab_hosts.fault(host, "drop", off=True)
    assert lab_hosts.run(host, "sleep 2; echo finished").stdout.strip() == "finished"


def test_latency_slows_round_trips(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    t0 = time.monotonic()
    lab_hosts.run(host, "true")
    base = time.monotonic() - t0
    lab_hosts.fault(host, "latency", "300")
    t0 = time.monotonic()
    lab_hosts.run(host, "true")
    slow = time.monotonic() - t0
    assert slow > base + 1.0  # an ssh login takes several round trips
    lab_hosts.fault(host, "latency", off=True)
    lab_hosts.wait_up(host)


def test_dpkg_lock_held_by_another_process(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "dpkg-lock")
    out = lab_hosts.sudo(host, "apt-get install -y gpunode-lab-nothing", check=False)
    assert out.returncode != 0
    assert "Could not get lock /var/lib/dpkg/lock-frontend" in out.stderr
    lab_hosts.fault(host, "dpkg-lock", off=True)
    out = lab_hosts.sudo(host, "apt-get install -y gpunode-lab-nothing", check=False)
    assert "Could not get lock" not in out.stderr


def test_disk_full(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "disk-full")
    avail = lab_hosts.run(host, "df --output=avail -k /var/cache/apt/archives | tail -1")
    assert int(avail.stdout) < 1024
    out = lab_hosts.sudo(host, "head -c 2000000 /dev/zero > /var/cache/apt/archives/x", check=False)
    assert out.returncode != 0 and "No space left on device" in out.stderr
    lab_hosts.fault(host, "disk-full", off=True)
    assert lab_hosts.run(host, "mountpoint -q /var/cache/apt/archives", check=False).returncode


def test_secure_boot_and_nouveau(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    assert lab_hosts.run(host, "mokutil --sb-state").stdout == "SecureBoot disabled\n"
    assert lab_hosts.run(host, "test -d /sys/module/nouveau", check=False).returncode == 1
    lab_hosts.fault(host, "secure-boot")
    lab_hosts.fault(host, "nouveau")
    assert lab_hosts.run(host, "mokutil --sb-state").stdout == "SecureBoot enabled\n"
    assert lab_hosts.run(host, "cat /sys/module/nouveau/initstate").stdout == "live\n"
    lab_hosts.reboot(host)  # firmware and module state come back after a reboot
    assert lab_hosts.run(host, "mokutil --sb-state").stdout == "SecureBoot enabled\n"
    assert lab_hosts.run(host, "test -d /sys/module/nouveau", check=False).returncode == 0
    lab_hosts.fault(host, "secure-boot", off=True)
    lab_hosts.fault(host, "nouveau", off=True)
    assert lab_hosts.run(host, "mokutil --sb-state").stdout == "SecureBoot disabled\n"
    assert lab_hosts.run(host, "test -d /sys/module/nouveau", check=False).returncode == 1


def test_hold_marks_the_package_in_dpkg(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "hold", "openssh-client")
    assert lab_hosts.run(host, "apt-mark showhold").stdout.split() == ["openssh-client"]
    assert lab_hosts.run(lab_hosts.names[0], "apt-mark showhold").stdout.strip() == ""
    lab_hosts.fault(host, "hold", "openssh-client", off=True)
    assert lab_hosts.run(host, "apt-mark showhold").stdout.strip() == ""


def test_bg_upgrade_bumps_the_user_space_version(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.sudo(
        host,
        "mkdir -p /usr/share/gpunode-lab && "
        "echo '580.159.04 open' > /usr/share/gpunode-lab/driver-version && "
        # the module DKMS would have installed for the running kernel
        'd=/lib/modules/$(uname -r)/updates/dkms && mkdir -p "$d" && echo ko > "$d/nvidia.ko"',
    )
    lab_hosts.reboot(host)
    lab_hosts.fault(host, "bg-upgrade")
    files = lab_hosts.run(
        host, "cat /usr/share/gpunode-lab/driver-version /sys/module/nvidia/version"
    )
    user_space, loaded = files.stdout.splitlines()
    assert loaded == "580.159.04"
    assert user_space.split()[0] != "580.159.04" and user_space.startswith("580.")


def test_load_pattern(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "load", "busy")
    out = lab_hosts.run(host, "cat /etc/gpunode-lab/load.json")
    assert '"pattern": "busy"' in out.stdout


def test_unknown_knob_is_an_error(lab_hosts):
    out = lab_hosts.cli("fault", lab_hosts.names[0], "meltdown", check=False)
    assert out.returncode == 1 and "unknown knob" in out.stderr


def test_status_lists_faults(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.fault(host, "nouveau")
    text = subprocess.run(
        ["gpunode", "lab", "status"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "GPUNODE_LAB_DIR": str(lab_hosts.state_dir)},
    ).stdout
    assert any(line.startswith(host) and "nouveau" in line for line in text.splitlines())


def test_nouveau_stays_out_only_when_the_initramfs_blacklists_it(lab_hosts, lab_fresh_host):
    """As on Ubuntu, nouveau loads from the initramfs: a modprobe.d blacklist alone does not
    keep it out at the next boot; one that update-initramfs put into the image does."""
    host = lab_fresh_host
    initrd = '"/boot/initrd.img-$(uname -r)"'
    lab_hosts.fault(host, "nouveau")
    try:
        refused = lab_hosts.run(host, "/usr/sbin/update-initramfs -u", check=False)
        assert refused.returncode != 0 and "Access denied" in refused.stderr
        lab_hosts.sudo(host, "echo 'blacklist nouveau' > /etc/modprobe.d/site-nouveau.conf")
        lab_hosts.reboot(host)
        assert lab_hosts.run(host, "test -d /sys/module/nouveau", check=False).returncode == 0
        before = lab_hosts.run(host, f"sha256sum < {initrd}").stdout
        out = lab_hosts.sudo(host, "update-initramfs -u").stdout
        assert out.startswith("update-initramfs: Generating /boot/initrd.img-")
        assert lab_hosts.run(host, f"sha256sum < {initrd}").stdout != before
        assert "blacklist nouveau\n" in lab_hosts.run(host, f"cat {initrd}").stdout
        lab_hosts.reboot(host)
        assert lab_hosts.run(host, "test -d /sys/module/nouveau", check=False).returncode == 1
    finally:
        lab_hosts.fault(host, "nouveau", off=True)
