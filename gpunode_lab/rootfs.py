"""The layers of a host's root: a shared lab layer over the machine's root, then the host's own.

The lab layer (base/) holds what every host shares: the Ubuntu skeleton (skeleton.py),
the Ubuntu release files, the
`ubuntu` login user, sudoers, sshd settings, the stand-in programs, Ubuntu's apt
configuration with none of the machine's mirrors or settings, and the dpkg database of a
real Ubuntu host (dpkgdb.py); the machine's own files in directories such as /usr/local/bin
and /etc/ld.so.conf.d are hidden. Each host's upper layer starts
with only its identity: hostname, machine-id, host keys and simulated GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from gpunode_lab import dpkgdb
from gpunode_lab.gpumodels import MODELS, gpus_document
from gpunode_lab.repo.catalog_kernel import boot_kernel
from gpunode_lab.skeleton import write_skeleton
from gpunode_lab.standins import STANDINS
from gpunode_lab.state import UBUNTU, HostPaths, LabConfig, LabPaths

USER = "ubuntu"

OS_RELEASE = {
    "22.04": ("22.04.5 LTS (Jammy Jellyfish)", "Ubuntu 22.04.5 LTS"),
    "24.04": ("24.04.3 LTS (Noble Numbat)", "Ubuntu 24.04.3 LTS"),
}

SSHD_CONF = """\
# gpunode lab: every host has only its own ed25519 key; keys only, no passwords.
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UseDNS no
PrintMotd no
MaxStartups 200:30:400
MaxSessions 100
PidFile /run/sshd.pid
"""

MACHINE_HOST_KEYS = [
    f"ssh_host_{kind}_key{ext}"
    for kind in ("rsa", "ecdsa", "ed25519", "dsa")
    for ext in ("", ".pub")
]


def os_release(version: str) -> str:
    codename = UBUNTU[version]
    full, pretty = OS_RELEASE[version]
    return (
        f'PRETTY_NAME="{pretty}"\nNAME="Ubuntu"\nVERSION_ID="{version}"\nVERSION="{full}"\n'
        f"VERSION_CODENAME={codename}\nID=ubuntu\nID_LIKE=debian\n"
        'HOME_URL="https://www.ubuntu.com/"\nSUPPORT_URL="https://help.ubuntu.com/"\n'
        'BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"\n'
        f"UBUNTU_CODENAME={codename}\n"
    )


def lsb_release(version: str) -> str:
    return (
        f"DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE={version}\nDISTRIB_CODENAME={UBUNTU[version]}\n"
        f'DISTRIB_DESCRIPTION="{OS_RELEASE[version][1]}"\n'
    )


def _write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    os.chmod(path, mode)


# Directories whose contents on the machine are the machine's own (its CUDA wrappers in
# /usr/local/bin, its CUDA library path in ld.so.conf.d, its CA in /usr/local/share, its apt
# settings and keys): on a host they hold only what the lab layer puts there (the
# skeleton's files, the stand-ins, Ubuntu's apt files).
MACHINE_DIRS = (
    "etc/apt/apt.conf.d",
    "etc/apt/auth.conf.d",
    "etc/apt/keyrings",
    "etc/apt/preferences.d",
    "etc/apt/trusted.gpg.d",
    "etc/ld.so.conf.d",
    "etc/modprobe.d",
    "etc/modules-load.d",
    "etc/profile.d",
    "usr/local/bin",
    "usr/local/etc",
    "usr/local/include",
    "usr/local/lib",
    "usr/local/sbin",
    "usr/local/share",
    "usr/local/src",
)
# as base-files and ca-certificates leave them on Ubuntu
USR_LOCAL_SHARE = ("usr/local/share/ca-certificates", "usr/local/share/man")

# What the machine has that a fresh Ubuntu host would not (globs under /).
MACHINE_ONLY = (
    "etc/apt/apt.conf",
    "etc/apt/auth.conf",
    "etc/apt/trusted.gpg",
    "usr/local/cuda",
    "usr/local/cuda-*",
    "etc/alternatives/cuda*",
    "var/lib/dpkg/alternatives/cuda*",
    "etc/pip.conf",
    "etc/xdg/pip",
    "root/.config/pip",
    "root/.pip",
    # no container engine either (nor in /usr/local/bin, a MACHINE_DIRS): `gpunode lab fault
    # HOST container-runtime` installs one
    "usr/bin/docker",
    "usr/bin/dockerd",
    "usr/bin/containerd",
    "etc/docker",
    "etc/containerd",
)


def _whiteout(path: Path) -> None:
    """Hide a file of the machine's root from the hosts (an overlayfs whiteout)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, 0o600 | 0o020000, os.makedev(0, 0))


def _opaque_dir(path: Path) -> None:
    """An empty directory that hides the machine's directory of the same name."""
    path.mkdir(parents=True, exist_ok=True)
    os.setxattr(path, "trusted.overlay.opaque", b"y")


def _free_id(*files: str) -> int:
    used: set[int] = set()
    for name in files:
        for line in Path(name).read_text().splitlines():
            parts = line.split(":")
            if len(parts) > 2 and parts[2].isdigit():
                used.add(int(parts[2]))
    n = 1000
    while n in used:
        n += 1
    return n


def _accounts(base: Path, password_hash: str | None) -> int:
    """Copy the account files with a `ubuntu` user added; returns its uid."""
    uid = _free_id("/etc/passwd", "/etc/group")
    passwd = Path("/etc/passwd").read_text()
    passwd += f"{USER}:x:{uid}:{uid}:Ubuntu:/home/{USER}:/bin/bash\n"
    _write(base / "etc/passwd", passwd)
    shadow = Path("/etc/shadow").read_text()
    shadow += f"{USER}:{password_hash or '*'}:20000:0:99999:7:::\n"
    _write(base / "etc/shadow", shadow, 0o640)
    shutil.copystat("/etc/shadow", base / "etc/shadow")
    os.chown(base / "etc/shadow", 0, os.stat("/etc/shadow").st_gid)
    groups = []
    for line in Path("/etc/group").read_text().splitlines():
        name, pw, gid, members = ([*line.split(":"), "", "", ""])[:4]
        if name in ("sudo", "adm"):
            members = ",".join([m for m in members.split(",") if m] + [USER])
        groups.append(":".join([name, pw, gid, members]))
    groups.append(f"{USER}:x:{uid}:")
    _write(base / "etc/group", "\n".join(groups) + "\n")
    gshadow = Path("/etc/gshadow").read_text() + f"{USER}:!::\n"
    _write(base / "etc/gshadow", gshadow, 0o640)
    os.chown(base / "etc/gshadow", 0, os.stat("/etc/gshadow").st_gid)
    return uid


def hash_password(password: str) -> str:
    """A SHA-512 crypt hash; the password goes through stdin, never argv."""
    out = subprocess.run(
        ["openssl", "passwd", "-6", "-stdin"],
        input=password + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def build_base(paths: LabPaths, cfg: LabConfig, client_pub: str, password_hash: str | None) -> None:
    base = paths.base
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    # an Ubuntu server's directories and kernel, whatever the machine has
    write_skeleton(base, boot_kernel())
    release = os_release(cfg.ubuntu)
    _write(base / "etc/os-release", release)
    _write(base / "usr/lib/os-release", release)
    _write(base / "etc/lsb-release", lsb_release(cfg.ubuntu))
    _write(base / "etc/issue", f"{OS_RELEASE[cfg.ubuntu][1]} \\n \\l\n\n")
    uid = _accounts(base, password_hash)
    rule = "ALL=(ALL:ALL) ALL" if password_hash else "ALL=(ALL) NOPASSWD:ALL"
    _write(base / "etc/sudoers.d/90-gpunode-lab", f"{USER} {rule}\n", 0o440)

    home = base / "home" / USER
    shutil.copytree("/etc/skel", home)
    _write(home / ".ssh/authorized_keys", client_pub, 0o600)
    os.chmod(home / ".ssh", 0o700)
    os.chmod(home, 0o750)
    for dirpath, dirnames, filenames in os.walk(home):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.lchown(name, uid, uid)

    _write(base / "etc/ssh/sshd_config.d/00-gpunode-lab.conf", SSHD_CONF)
    for name in MACHINE_HOST_KEYS:
        if os.path.lexists(f"/etc/ssh/{name}"):
            _whiteout(base / "etc/ssh" / name)
    if dpkgdb.has_capture(cfg.ubuntu):
        _opaque_dir(base / "var/lib/dpkg")
        dpkgdb.install(base, cfg.ubuntu)
    else:
        _freeze_dpkg(base)
    # A fresh Ubuntu has no CUDA and no pip configuration: hide the machine's.
    for name in MACHINE_ONLY:
        for found in sorted(Path("/").glob(name)):
            if os.path.lexists(found):
                hidden = base / found.relative_to("/")
                if os.path.lexists(hidden):  # in the dpkg copy
                    hidden.unlink()
                _whiteout(hidden)
    for rel in MACHINE_DIRS:
        _opaque_dir(base / rel)
    for rel in USR_LOCAL_SHARE:
        (base / rel).mkdir(mode=0o755, parents=True, exist_ok=True)
    # apt talks only to the lab repository (no machine mirrors, no machine lists), with
    # Ubuntu's settings and keys
    _write(base / "etc/apt/sources.list", "")
    dpkgdb.install_apt_config(base)
    _opaque_dir(base / "etc/apt/sources.list.d")
    _opaque_dir(base / "var/lib/apt/lists")
    (base / "var/lib/apt/lists/partial").mkdir()
    _opaque_dir(base / "var/cache/apt/archives")
    (base / "var/cache/apt/archives/partial").mkdir()
    _opaque_dir(base / "etc/gpunode-lab")
    _opaque_dir(base / "usr/share/gpunode-lab")
    for rel, text in STANDINS.items():
        _write(base / rel, text, 0o755)


def _freeze_dpkg(base: Path) -> None:
    """For a release the lab has no capture of, the hosts get a copy of the machine's dpkg
    database as it is now, not a view of it:
    a package the machine installs or removes while the lab runs would otherwise show up
    in every host, half-configured states included."""
    target = base / "var/lib/dpkg"
    shutil.copytree(
        "/var/lib/dpkg",
        target,
        symlinks=True,
        ignore=shutil.ignore_patterns("lock", "lock-frontend", "Lock", "*-old"),
        copy_function=_link_or_copy,
    )
    _opaque_dir(target)


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link costs no time or space, and stays frozen: dpkg replaces its files by
    renaming new ones over them, never by writing into them."""
    try:
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copy2(src, dst)


def generate_host_key(keys: Path, comment: str) -> str:
    """An ed25519 host key, made in-process (no ssh-keygen fork); returns the public line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    keys.mkdir(parents=True, exist_ok=True)
    _write(keys / "ssh_host_ed25519_key", private, 0o600)
    _write(keys / "ssh_host_ed25519_key.pub", f"{public} root@{comment}\n")
    return public


def prepare_upper(host: HostPaths, name: str, cfg: LabConfig) -> None:
    """(Re)create a host's upper layer: a fresh disk with only the host's identity on it."""
    for d in (host.upper, host.work):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    host.merged.mkdir(parents=True, exist_ok=True)
    host.ctl.mkdir(parents=True, exist_ok=True)
    up = host.upper
    for sub in ("etc", "etc/ssh", "etc/gpunode-lab"):
        (up / sub).mkdir(mode=0o755, exist_ok=True)
        os.chmod(up / sub, 0o755)
    _write(up / "etc/hostname", f"{name}\n")
    _write(up / "etc/hosts", f"127.0.0.1\tlocalhost\n{cfg.host_address(name)}\t{name}\n")
    _write(up / "etc/machine-id", os.urandom(16).hex() + "\n", 0o444)
    for fname in ("ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"):
        src = host.keys / fname
        _write(up / "etc/ssh" / fname, src.read_bytes(), os.stat(src).st_mode & 0o777)
    model = MODELS[cfg.model]
    doc = gpus_document(model, cfg.gpus, name)
    _write(up / "etc/gpunode-lab/gpus.json", json.dumps(doc, indent=2) + "\n")
    seed = int.from_bytes(name.encode()[-4:], "big")
    _write(up / "etc/gpunode-lab/load.json", json.dumps({"pattern": "idle", "seed": seed}) + "\n")
