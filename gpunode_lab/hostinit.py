"""PID 1 of one lab host: builds the host's root, starts sshd, reaps orphans, ends on reboot.

Runs inside fresh mount, PID, UTS and IPC namespaces (made by `unshare`), so every mount
here is private to the host and disappears with it, and every process of the host dies
when this one exits. Standard library only: it is run by path with `python -I`.

Signals: SIGINT = reboot (exit 100), SIGTERM = power off (exit 101), SIGUSR1 = make
sshd match ctl/sshd.json ({"run": bool, "listen": "ADDRESS:PORT"}), which the
supervisor writes before each boot and before each signal.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

EXIT_REBOOT = 100
EXIT_POWEROFF = 101

MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_BIND, MS_REC = 4096, 16384

DISK_FULL_SH = (
    "mount -t tmpfs -o size=8m,mode=755 gpunode-lab-full /var/cache/apt/archives"
    " && mkdir -p /var/cache/apt/archives/partial"
    " && head -c 7864320 /dev/zero > /var/cache/apt/archives/.filler"
)
DISK_FULL_OFF_SH = "umount /var/cache/apt/archives"

EFI_GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
PERSISTENCED = "/usr/bin/nvidia-persistenced"
DEV_DIR = "/run/gpunode-lab-dev"  # the GPUs' device stand-ins (gpunode_lab/slurm.py)

_libc = ctypes.CDLL(None, use_errno=True)


def mount(src: str, target: str, fstype: str | None, flags: int = 0, data: str = "") -> None:
    rc = _libc.mount(
        src.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or 'bind'} {src} on {target}: {os.strerror(err)}")


def write(path: str, text: str, mode: int = 0o644) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def secure_boot_bytes(enabled: bool) -> bytes:
    return b"\x06\x00\x00\x00" + (b"\x01" if enabled else b"\x00")


def booted_kernel(root: str) -> str:
    """The kernel this boot loads: where /boot/vmlinuz points, as a bootloader would."""
    try:
        return os.readlink(f"{root}/boot/vmlinuz").rsplit("/", 1)[-1].removeprefix("vmlinuz-")
    except OSError:
        return os.uname().release


# --- Secure Boot, as the kernel and shim enforce it for the nvidia module. The firmware
# keeps shim's enrolled Machine Owner Keys (MokListRT: here the sha256 of each key's DER
# file, after efivarfs's 4 attribute bytes). The kernel loads a module only if a key it
# trusts signed it: Canonical's (Ubuntu's linux-modules-nvidia-*) or an enrolled MOK (a
# DKMS build signed with /var/lib/shim-signed/mok/MOK.der); with Secure Boot off anything
# loads, an unsigned module with the kernel's taint warning. ---
MOK_GUID = "605dab50-e046-4300-abb6-3dd810dd8b23"
MOK_LIST_VAR = f"MokListRT-{MOK_GUID}"
MOK_DIR = "/var/lib/shim-signed/mok"
CANONICAL = "Canonical Ltd. Kernel Module Signing"
# What the real kernel and modprobe say (kernel/module/signing.c, kmod's modprobe)
REJECTED = "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service"
UNSIGNED = "Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7"
UNKNOWN_KEY = "Loading of module with unavailable key is rejected"
TAINT = (
    "nvidia: module verification failed: signature and/or required key missing - tainting kernel"
)


def mok_list_bytes(enrolled: list[str]) -> bytes:
    return b"\x07\x00\x00\x00" + "".join(f"{s}\n" for s in enrolled).encode()


def signer(ko: str) -> str | None:
    """The key that signed a lab module: "Canonical ...", "MOK <sha256>", or None."""
    try:
        with open(ko) as f:
            for line in f:
                if line.startswith("signer: "):
                    return line.removeprefix("signer: ").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return None


def verdict(ko: str, secure_boot: bool, enrolled: list[str]) -> tuple[bool, list[str]]:
    """Whether the kernel loads the module, and what it logs."""
    who = signer(ko)
    trusted = who == CANONICAL or (who or "").removeprefix("MOK ") in enrolled
    if trusted:
        return True, []
    if not secure_boot:
        return True, [TAINT] if who is None else []
    return False, [UNSIGNED if who is None else UNKNOWN_KEY, REJECTED]


def ubuntu_module(root: str, kernel: str) -> dict[str, Any] | None:
    """Ubuntu's signed, precompiled module for `kernel` (linux-modules-nvidia-*), if any:
    its first line names the release and flavour it was built from."""
    for ko in sorted(glob.glob(f"{root}/lib/modules/{kernel}/kernel/nvidia-*/nvidia.ko")):
        try:
            with open(ko) as f:
                words = f.readline().split()
        except (OSError, UnicodeDecodeError):
            continue
        if len(words) >= 6 and words[3] == "nvidia.ko":
            return {"version": words[4], "flavor": words[5], "path": ko.removeprefix(root)}
    return None


def dkms_module(root: str, kernel: str) -> str | None:
    ko = f"{root}/lib/modules/{kernel}/updates/dkms/nvidia.ko"
    return ko if os.path.exists(ko) else None


# --- end Secure Boot ---


def module_state(
    root: str, kernel: str, secure_boot: bool = False, enrolled: list[str] | None = None
) -> dict[str, Any]:
    """What the kernel would load at boot: the installed driver, if DKMS built its module
    for `kernel` (modprobe prefers updates/dkms), else Ubuntu's signed module for it; under
    Secure Boot only a module signed by a trusted key (verdict)."""
    none: dict[str, Any] = {"loaded": False, "version": None, "flavor": None, "kernel": kernel}
    dkms = dkms_module(root, kernel)
    if dkms is None:
        ubuntu = ubuntu_module(root, kernel)
        if ubuntu is None:
            return none
        return {"loaded": True, "version": ubuntu["version"], "flavor": ubuntu["flavor"],
                "kernel": kernel, "signed_by": CANONICAL}  # fmt: skip
    loads, kmsg = verdict(dkms, secure_boot, enrolled or [])
    if not loads:
        return {**none, "error": kmsg[-1], "kmsg": kmsg}
    if kmsg:
        none["kmsg"] = kmsg
    try:
        with open(f"{root}/usr/share/gpunode-lab/driver-version") as f:
            version, flavor = ([*f.read().split(), "", ""])[:2]
    except OSError:
        version = ""
        flavor = ""
    if not version:
        return none
    return {**none, "loaded": True, "version": version, "flavor": flavor or "proprietary"}


def initramfs_blacklists(root: str, module: str) -> bool:
    """Whether the running kernel's initramfs (as the lab's update-initramfs writes it)
    carries `blacklist MODULE`."""
    try:
        with open(f"{root}/boot/initrd.img-{booted_kernel(root)}") as f:
            return f"blacklist {module}" in f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return False


def nvrm_line(version: str, flavor: str) -> str:
    if flavor == "open":
        return (
            f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build"
            "  (dvs-builder@U16-I3-B03-4-3)  Thu Oct 10 18:50:24 UTC 2025\n"
            "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) \n"
        )
    return (
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}"
        "  Thu Oct 10 18:50:24 UTC 2025\n"
        "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) \n"
    )


def build_root(spec: dict[str, Any]) -> None:
    m = spec["merged"]
    lowers = ":".join(spec["lowers"])
    mount(
        "overlay",
        m,
        "overlay",
        0,
        f"lowerdir={lowers},upperdir={spec['upper']},workdir={spec['work']}",
    )
    mount("proc", f"{m}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("/sys", f"{m}/sys", None, MS_BIND | MS_REC)
    mount("/dev", f"{m}/dev", None, MS_BIND | MS_REC)
    mount("shm", f"{m}/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    mount("run", f"{m}/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=64m")
    for hidden in spec["mask"]:  # the lab's own state: other hosts' disks, the client key
        if os.path.isdir(f"{m}{hidden}"):
            mount("gpunode-lab-mask", f"{m}{hidden}", "tmpfs", 0, "size=4k,mode=700")
    os.makedirs(f"{m}/run/sshd", mode=0o755, exist_ok=True)
    # systemd's mark that it is the init (what `systemctl` checks, and gpunode's service
    # operation): the lab's systemctl stand-in runs the units lab packages ship
    os.makedirs(f"{m}/run/systemd/system", mode=0o755, exist_ok=True)

    boot_id = f"{spec['ctl']}/boot_id"
    write(boot_id, spec["boot_id"] + "\n", 0o444)
    mount(boot_id, f"{m}/proc/sys/kernel/random/boot_id", None, MS_BIND)

    # The PCI bus: one directory per simulated GPU.
    pci = f"{m}/sys/bus/pci/devices"
    mount("gpunode-lab-pci", pci, "tmpfs", 0, "size=1m,mode=755")
    for dev in spec["pci"]:
        for key in ("vendor", "device", "class", "label"):
            write(f"{pci}/{dev['slot']}/{key}", dev[key] + "\n", 0o444)

    # The kernel /boot/vmlinuz points to is the one running (the lab's uname reads it).
    kernel = booted_kernel(m)
    write(f"{spec['ctl']}/osrelease", kernel + "\n", 0o444)
    mount(f"{spec['ctl']}/osrelease", f"{m}/proc/sys/kernel/osrelease", None, MS_BIND)
    write(f"{m}/run/gpunode-lab-kernel", kernel + "\n", 0o444)

    # The kernel module: the installed driver is loaded at boot if built for this kernel,
    # unless nouveau (loaded from the initramfs when the image does not blacklist it) has
    # taken the GPUs.
    enrolled = list(spec.get("mok_enrolled") or [])
    state = module_state(m, kernel, bool(spec.get("secure_boot")), enrolled)
    if state.get("kmsg"):  # the kernel's log of this boot, as dmesg would show it
        write(f"{m}/run/gpunode-lab-kmsg", "".join(f"{line}\n" for line in state["kmsg"]))
    nouveau = bool(spec.get("nouveau")) and not initramfs_blacklists(m, "nouveau")
    if nouveau:
        state["loaded"] = False
    write(f"{m}/etc/gpunode-lab/module.json", json.dumps(state) + "\n")
    mods = f"{m}/sys/module"
    mount("gpunode-lab-modules", mods, "tmpfs", 0, "size=1m,mode=755")
    drv = f"{m}/proc/driver"
    mount("gpunode-lab-driver", drv, "tmpfs", 0, "size=1m,mode=555")
    if state["loaded"]:
        write(f"{mods}/nvidia/version", state["version"] + "\n", 0o444)
        for name in ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"):
            write(f"{mods}/{name}/initstate", "live\n", 0o444)
        write(f"{drv}/nvidia/version", nvrm_line(state["version"], state["flavor"]), 0o444)
        # the GPUs' device files, as the loaded module makes them (the lab's /dev is the
        # machine's, so stand-ins elsewhere: Slurm's gres.conf names them)
        gpus = [d for d in spec["pci"] if d["class"].startswith("0x03")]
        for i in range(len(gpus)):
            write(f"{m}{DEV_DIR}/nvidia{i}", "", 0o666)
    if nouveau:
        write(f"{mods}/nouveau/initstate", "live\n", 0o444)

    # Firmware: an EFI machine whose Secure Boot state is a fault knob.
    fw = f"{m}/sys/firmware"
    mount("gpunode-lab-firmware", fw, "tmpfs", 0, "size=1m,mode=755")
    var = f"{fw}/efi/efivars/SecureBoot-{EFI_GUID}"
    os.makedirs(os.path.dirname(var))
    with open(var, "wb") as f:
        f.write(secure_boot_bytes(bool(spec.get("secure_boot"))))
    with open(f"{fw}/efi/efivars/{MOK_LIST_VAR}", "wb") as f:
        f.write(mok_list_bytes(enrolled))


WANTS = "/etc/systemd/system/multi-user.target.wants"


def start_enabled_units() -> None:
    """What systemd does at boot for the units enabled by the lab's systemctl stand-in."""
    try:
        names = sorted(n for n in os.listdir(WANTS) if n.endswith(".service"))
    except OSError:
        return
    for name in names:
        subprocess.run(["/usr/bin/systemctl", "start", name], check=False, timeout=30)


class Init:
    def __init__(self, spec: dict[str, Any], ctl_fd: int) -> None:
        self.spec = spec
        self.ctl_fd = ctl_fd
        self.sshd: subprocess.Popen[bytes] | None = None
        self.listen = ""

    def wanted(self) -> tuple[bool, str]:
        default = f"{self.spec['address']}:{self.spec['port']}"
        try:
            fd = os.open("sshd.json", os.O_RDONLY, dir_fd=self.ctl_fd)
            with os.fdopen(fd) as f:
                want = json.load(f)
            return bool(want.get("run", True)), str(want.get("listen") or default)
        except (OSError, ValueError):
            return True, default

    def reconcile(self) -> None:
        run, listen = self.wanted()
        alive = self.sshd is not None and self.sshd.poll() is None
        if alive and (not run or listen != self.listen):
            assert self.sshd is not None
            self.sshd.terminate()  # the listener only: open sessions carry on
            self.sshd.wait()
            alive = False
        if run and not alive:
            self.listen = listen
            self.sshd = subprocess.Popen(
                [
                    "/usr/sbin/sshd",
                    "-D",
                    "-E",
                    "/var/log/sshd.log",
                    "-o",
                    f"ListenAddress={listen}",
                ],
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )

    def run(self) -> None:
        signal.signal(signal.SIGINT, lambda *_: os._exit(EXIT_REBOOT))
        signal.signal(signal.SIGTERM, lambda *_: os._exit(EXIT_POWEROFF))
        signal.signal(signal.SIGUSR1, lambda *_: self.reconcile())
        self.reconcile()
        start_enabled_units()
        if os.path.isdir("/sys/module/nvidia") and os.access(PERSISTENCED, os.X_OK):
            # the package's unit is enabled: it starts at boot once the module has loaded
            subprocess.run(
                ["/usr/bin/systemctl", "start", "nvidia-persistenced"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        with open("/run/gpunode-lab-ready", "w") as f:
            f.write(f"{time.time()}\n")
        while True:  # PID 1 adopts every orphan of the host: reap them all
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                signal.pause()


def main() -> None:
    with open(sys.argv[1]) as f:
        spec: dict[str, Any] = json.load(f)
    build_root(spec)
    ctl_fd = os.open(spec["ctl"], os.O_RDONLY | os.O_DIRECTORY)
    socket.sethostname(spec["name"])
    os.chroot(spec["merged"])
    os.chdir("/")
    os.environ.clear()
    os.environ.update(
        PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", LANG="C.UTF-8"
    )
    if spec.get("disk_full"):
        subprocess.run(["/bin/sh", "-c", DISK_FULL_SH], check=False)
    Init(spec, ctl_fd).run()


if __name__ == "__main__":
    main()
