"""Lab hosts are real SSH servers with real sudo, isolated from each other and the machine."""

from __future__ import annotations

import json
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from gpunode_lab.state import net_address
from tests.conftest import TEST_LAB_NET

pytestmark = pytest.mark.lab


def test_inventory_loads_and_points_at_the_lab(lab_hosts):
    from gpunode.inventory import load

    inv = load(str(lab_hosts.inventory_path))
    hosts = {h.name: h for h in inv.select(None)}
    assert sorted(hosts) == sorted(lab_hosts.names)
    for name, host in hosts.items():
        assert host.address == lab_hosts.addresses[name]
        assert host.ssh.host_key_policy == "strict"
        assert Path(host.ssh.identity_file).is_file()
        assert host.repos.nvidia.startswith(f"http://{net_address(TEST_LAB_NET, 10)}")
        assert host.gpus.model == "H200" and host.gpus.count == 2
    for line in Path(lab_hosts.known_hosts).read_text().splitlines():
        assert line.split()[1] == "ssh-ed25519"


def test_gpunode_check_accepts_the_inventory(lab_hosts):
    out = subprocess.run(
        ["gpunode", "check", str(lab_hosts.inventory_path)], capture_output=True, text=True
    )
    if "No such command" in out.stderr:
        pytest.skip("gpunode check is not built yet")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ssh_client_and_sudo_with_inventory_settings(lab_hosts):
    for name in lab_hosts.names:
        out = lab_hosts.run(name, "hostname; id -un; sudo -n id -u; . /etc/os-release; echo $ID")
        assert out.stdout.split() == [name, "ubuntu", "0", "ubuntu"]


def test_paramiko_with_strict_host_keys(lab_hosts):
    import paramiko

    name = lab_hosts.names[0]
    client = paramiko.SSHClient()
    client.load_host_keys(str(lab_hosts.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        lab_hosts.addresses[name],
        port=lab_hosts.port,
        username="ubuntu",
        key_filename=str(lab_hosts.key),
        look_for_keys=False,
        allow_agent=False,
        timeout=10,
    )
    try:
        _, stdout, _ = client.exec_command("sudo -n head -c 5 /etc/shadow; echo; uname -n")
        assert stdout.channel.recv_exit_status() == 0
        assert stdout.read().decode().split() == ["root:", name]
    finally:
        client.close()


def test_a_wrong_host_key_is_rejected(lab_hosts, tmp_path):
    a, b = lab_hosts.names[:2]
    # b's key under a's address: strict checking must refuse it
    lines = Path(lab_hosts.known_hosts).read_text().splitlines()
    key_b = next(ln for ln in lines if ln.startswith(lab_hosts.addresses[b] + " "))
    bad = tmp_path / "known_hosts"
    bad.write_text(f"{lab_hosts.addresses[a]} {key_b.split(' ', 1)[1]}\n")
    argv = lab_hosts.ssh_argv(a, "true")
    argv[argv.index(f"UserKnownHostsFile={lab_hosts.known_hosts}")] = f"UserKnownHostsFile={bad}"
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 255
    assert "HOST IDENTIFICATION HAS CHANGED" in out.stderr


def test_hosts_are_isolated_from_each_other_and_the_machine(lab_hosts):
    a, b = lab_hosts.names[:2]
    marker = f"/etc/gpunode-lab-isolation-{uuid.uuid4().hex}"
    lab_hosts.sudo(a, f"echo written-in-{a} > {marker}")
    assert lab_hosts.run(a, f"cat {marker}").stdout.strip() == f"written-in-{a}"
    assert lab_hosts.run(b, f"test -e {marker}", check=False).returncode == 1
    assert not Path(marker).exists()
    # the lab's own files (other hosts' disks, the client key) are hidden inside hosts
    out = lab_hosts.sudo(a, f"ls -A {lab_hosts.state_dir}")
    assert out.stdout.strip() == ""
    lab_hosts.sudo(a, f"rm {marker}")


def test_os_release_and_identity(lab_hosts):
    name = lab_hosts.names[0]
    out = lab_hosts.run(name, "cat /etc/os-release /usr/lib/os-release")
    assert 'VERSION_ID="24.04"' in out.stdout and "VERSION_CODENAME=noble" in out.stdout
    ids = {n: lab_hosts.run(n, "cat /etc/machine-id").stdout.strip() for n in lab_hosts.names}
    assert len(set(ids.values())) == len(ids)


def test_boot_ids_differ_per_host(lab_hosts):
    ids = {
        n: lab_hosts.run(n, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
        for n in lab_hosts.names
    }
    assert len(set(ids.values())) == len(ids)
    status = lab_hosts.status()
    for n, boot_id in ids.items():
        assert status[n]["boot_id"] == boot_id


def test_apt_sources_hold_only_the_lab(lab_hosts):
    # as on Ubuntu 24.04: one deb822 ubuntu.sources (here the lab's stand-in of the archive)
    name = lab_hosts.names[0]
    out = lab_hosts.run(name, "cat /etc/apt/sources.list; ls -A /etc/apt/sources.list.d")
    assert out.stdout.strip() == "ubuntu.sources"
    uris = [
        line.split()[1:]
        for line in lab_hosts.run(
            name, "cat /etc/apt/sources.list.d/ubuntu.sources"
        ).stdout.splitlines()
        if line.startswith("URIs:")
    ]
    assert uris and all(u.startswith("http://127.") for us in uris for u in us), uris


def test_simulated_gpus_on_the_pci_bus(lab_hosts):
    name = lab_hosts.names[0]
    lines = lab_hosts.run(name, "lspci").stdout.splitlines()
    assert lines == [
        "00:06.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] "
        "(rev a1)",
        "00:07.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] "
        "(rev a1)",
    ]
    vendor = lab_hosts.run(name, "cat /sys/bus/pci/devices/0000:00:06.0/vendor").stdout
    assert vendor.strip() == "0x10de"
    doc = json.loads(lab_hosts.run(name, "cat /etc/gpunode-lab/gpus.json").stdout)
    assert doc["model"] == "H200" and doc["count"] == 2 and doc["host"] == name
    assert doc["bus_ids"] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert len(set(doc["uuids"])) == 2


def test_dpkg_state_stays_inside_the_host(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    other = lab_hosts.names[0]
    pkg = f"gpunode-lab-probe-{uuid.uuid4().hex[:8]}"
    build = (
        f"set -e; d=$(mktemp -d); mkdir -p $d/DEBIAN $d/usr/share/{pkg}; "
        f"echo hi > $d/usr/share/{pkg}/hi; "
        f"printf 'Package: {pkg}\\nVersion: 1.0\\nArchitecture: all\\n"
        f"Maintainer: lab <lab@example.invalid>\\nDescription: probe\\n' > $d/DEBIAN/control; "
        f"dpkg-deb --build $d /tmp/{pkg}.deb >/dev/null; dpkg -i /tmp/{pkg}.deb >/dev/null"
    )
    lab_hosts.sudo(host, build)
    out = lab_hosts.run(host, f"dpkg-query -W -f '${{Status}}' {pkg}")
    assert out.stdout == "install ok installed"
    assert lab_hosts.run(other, f"dpkg-query -W {pkg}", check=False).returncode != 0
    machine = subprocess.run(["dpkg-query", "-W", pkg], capture_output=True)
    assert machine.returncode != 0
    assert not Path(f"/usr/share/{pkg}").exists()


def test_reset_gives_a_fresh_disk(lab_hosts, lab_fresh_host):
    host = lab_fresh_host
    lab_hosts.sudo(host, "echo x > /etc/gpunode-lab-reset-probe")
    lab_hosts.reset(host)
    assert lab_hosts.run(host, "test -e /etc/gpunode-lab-reset-probe", check=False).returncode == 1
    # same host key: strict checking still passes
    assert lab_hosts.run(host, "hostname").stdout.strip() == host


def test_sshd_answers_on_each_address_only(lab_hosts):
    for address in lab_hosts.addresses.values():
        with socket.create_connection((address, lab_hosts.port), timeout=5) as s:
            assert s.recv(64).startswith(b"SSH-2.0-OpenSSH")


def test_dpkg_database_is_ubuntus_whatever_the_machine_has(lab_hosts, lab_fresh_host):
    """dpkg on a host answers as on the Ubuntu host it was captured from (dpkgdb.py), with no
    GPU stack; what the machine's dpkg has, or does while the lab runs, never reaches it."""
    host = lab_fresh_host
    out = lab_hosts.run(host, "dpkg-query -W -f '${Package} ${Version}\\n' base-files libc6")
    assert [line.split()[1].split("ubuntu")[0] for line in out.stdout.splitlines()] == [
        "13", "2.39-0"]  # fmt: skip
    held = lab_hosts.run(host, "apt-mark showhold; dpkg-query -W 'cuda*' 'libcudnn*' 'libnccl*'",
                         check=False)  # fmt: skip
    assert held.stdout == ""
    assert lab_hosts.run(host, "sudo -n dpkg --audit && sudo -n apt-get check -q").returncode == 0
    probe = Path("/var/lib/dpkg/info") / f"gpunode-lab-probe-{uuid.uuid4().hex[:8]}.list"
    probe.write_text("/nonexistent\n")
    try:
        seen = lab_hosts.run(host, f"ls /var/lib/dpkg/info/{probe.name}", check=False)
    finally:
        probe.unlink()
    assert seen.returncode != 0, "a file new in the machine's dpkg database shows in a host"


def test_apt_runs_with_ubuntus_settings_not_the_machines(lab_hosts):
    """apt.conf.d, preferences.d and trusted.gpg.d hold what Ubuntu's packages ship, whatever
    the machine set (e.g. Check-Valid-Until off, a PackageKit hook) or trusts."""
    host = lab_hosts.names[0]
    dirs = "/etc/apt/apt.conf.d /etc/apt/preferences.d /etc/apt/trusted.gpg.d"
    out = lab_hosts.run(host, f"ls -A {dirs}; test -e /etc/apt/trusted.gpg || echo none")
    assert out.stdout.split() == [
        "/etc/apt/apt.conf.d:", "01-vendor-ubuntu", "01autoremove", "70debconf",
        "/etc/apt/preferences.d:",
        "/etc/apt/trusted.gpg.d:", "ubuntu-keyring-2012-cdimage.gpg",
        "ubuntu-keyring-2018-archive.gpg", "none"]  # fmt: skip
    dump = lab_hosts.run(host, "apt-config dump").stdout
    assert 'Acquire::Changelogs::AlwaysOnline "true";' in dump  # Ubuntu's 01-vendor-ubuntu
    assert "Check-Valid-Until" not in dump and "PackageKit" not in dump
    assert 'DPkg::Pre-Install-Pkgs:: "/usr/sbin/dpkg-preconfigure --apt || true";' in dump


def test_the_machines_own_files_stay_hidden(lab_hosts):
    """/usr/local and the configuration directories gpunode writes to hold only what the lab
    layer puts there, whatever the machine has in them (here: CUDA wrappers such as
    /usr/local/bin/nvcc, a CUDA ld.so.conf.d entry)."""
    from gpunode_lab.standins import STANDINS

    host = lab_hosts.names[0]
    ours = sorted(Path(rel).name for rel in STANDINS if rel.startswith("usr/local/bin/"))
    listing = lab_hosts.run(
        host, "ls -A /usr/local/bin; echo --; ls -A /etc/ld.so.conf.d /etc/profile.d "
        "/usr/local/lib /usr/local/share; command -v nvcc docker || echo none",
    ).stdout.split("--\n")  # fmt: skip
    assert listing[0].split() == ours
    assert listing[1].split() == [
        "/etc/ld.so.conf.d:", "libc.conf", "x86_64-linux-gnu.conf", "/etc/profile.d:",
        "/usr/local/lib:", "/usr/local/share:", "ca-certificates", "man", "none"]  # fmt: skip


def test_hosts_have_an_ubuntu_skeleton_whatever_the_machine_has(lab_hosts):
    """The skeleton is in the lab layer itself, so the hosts have it even where the machine
    (a bare Debian without kmod, grub or dkms) does not; and each host sees all of it. They
    boot an Ubuntu kernel, whatever kernel the machine runs: uname, /proc and the facts
    say 6.8.0-45-generic."""
    import os
    import shlex

    from gpunode_lab.skeleton import required_paths

    release = "6.8.0-45-generic"  # Ubuntu's kernel, not the machine's
    assert release != os.uname().release
    wanted = required_paths(release)
    for rel in ("etc/modprobe.d", "etc/profile.d", "etc/ld.so.conf.d", "etc/default/grub",
                "etc/apt/keyrings", f"boot/vmlinuz-{release}"):  # fmt: skip
        assert rel in wanted
    base = lab_hosts.state_dir / "disk" / "base"
    missing_in_layer = [rel for rel in wanted if not os.path.lexists(base / rel)]
    assert missing_in_layer == []
    check = " ; ".join(f"test -e /{shlex.quote(rel)} || echo {shlex.quote(rel)}" for rel in wanted)
    host = lab_hosts.names[0]
    assert lab_hosts.run(host, check).stdout == ""
    out = lab_hosts.run(host, f"ls -d /etc/modprobe.d /lib/modules/{release}/kernel; uname -r")
    assert out.stdout.split() == ["/etc/modprobe.d", f"/lib/modules/{release}/kernel", release]
    seen = lab_hosts.run(host, "cat /proc/sys/kernel/osrelease; uname -a; readlink /boot/vmlinuz")
    osrelease, uname_a, vmlinuz = seen.stdout.splitlines()
    assert (osrelease, uname_a.split()[2], vmlinuz) == (release, release, f"vmlinuz-{release}")
    assert "GRUB_CMDLINE_LINUX_DEFAULT=" in lab_hosts.run(host, "cat /etc/default/grub").stdout
