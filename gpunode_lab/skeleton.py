"""What every Ubuntu 22.04/24.04 server has, whatever the machine under the lab has.

A lab host's root is the lab layer over the machine's own root. The machine may be a
bare Debian without kmod, grub or systemd, so the directories and files configuration
tools expect are declared here, in one place, and written into the lab layer.
"""

from __future__ import annotations

import os
from pathlib import Path

# Directories a minimal Ubuntu server has and that configuration tools write into.
DIRECTORIES = (
    "boot",
    "etc/apt/apt.conf.d",
    "etc/apt/keyrings",
    "etc/apt/preferences.d",
    "etc/apt/sources.list.d",
    "etc/apt/trusted.gpg.d",
    "etc/default",
    "etc/dkms",
    "etc/ld.so.conf.d",
    "etc/modprobe.d",
    "etc/modules-load.d",
    "etc/profile.d",
    "etc/security/limits.d",
    "etc/sudoers.d",
    "etc/sysctl.d",
    "etc/systemd/system",
    "etc/udev/rules.d",
    "etc/update-motd.d",
    "usr/local/bin",
    "usr/local/sbin",
    "usr/share/keyrings",
    "usr/src",
    "var/lib/dkms",
    "var/log/apt",
)

GRUB_DEFAULT = """\
# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT_STYLE=hidden
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=`( . /etc/os-release; echo ${NAME:-Ubuntu} ) 2>/dev/null || echo Ubuntu`
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX=""
"""

# Files as Ubuntu ships them (base-files, libc-bin, kmod, grub2-common, procps).
FILES = {
    "etc/default/grub": GRUB_DEFAULT,
    "etc/environment": (
        'PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:'
        '/usr/games:/usr/local/games:/snap/bin"\n'
    ),
    "etc/ld.so.conf": "include /etc/ld.so.conf.d/*.conf\n\n",
    "etc/ld.so.conf.d/libc.conf": "# libc default configuration\n/usr/local/lib\n",
    "etc/ld.so.conf.d/x86_64-linux-gnu.conf": (
        "# Multiarch support\n/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n"
        "/usr/lib/x86_64-linux-gnu\n"
    ),
    "etc/modules": (
        "# /etc/modules: kernel modules to load at boot time.\n#\n"
        "# This file contains the names of kernel modules that should be loaded\n"
        '# at boot time, one per line. Lines beginning with "#" are ignored.\n'
    ),
    "etc/modprobe.d/blacklist.conf": (
        "# This file lists those modules which we don't want to be loaded by\n"
        "# alias expansion, usually so some other driver will be loaded for the\n"
        "# device instead.\n\n# evbug is a debug tool that should be loaded explicitly\n"
        "blacklist evbug\n"
    ),
    "etc/sysctl.conf": "# /etc/sysctl.conf - Configuration file for setting system variables\n",
}


def modules_dir(release: str) -> str:
    """Ubuntu's /lib is a link to usr/lib; a directory lib/ in the lab layer would hide the
    machine's link and every library under it, so write where the link points."""
    return f"usr/lib/modules/{release}" if os.path.islink("/lib") else f"lib/modules/{release}"


def kernel_files(release: str) -> dict[str, str]:
    """The running kernel as Ubuntu installs it: image, initramfs, config, modules."""
    return {
        f"boot/vmlinuz-{release}": "gpunode lab: stand-in kernel image\n",
        f"boot/initrd.img-{release}": "gpunode lab: stand-in initramfs\n",
        f"boot/config-{release}": "CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n",
        f"boot/System.map-{release}": "",
        f"{modules_dir(release)}/modules.dep": "",
        f"{modules_dir(release)}/modules.builtin": "",
        f"{modules_dir(release)}/modules.order": "",
    }


def kernel_links(release: str) -> dict[str, str]:
    return {"boot/vmlinuz": f"vmlinuz-{release}", "boot/initrd.img": f"initrd.img-{release}"}


def required_paths(release: str) -> list[str]:
    """Every path the skeleton guarantees, for the lab's own checks and tests."""
    return sorted(
        {
            *DIRECTORIES,
            *FILES,
            *kernel_files(release),
            *kernel_links(release),
            f"{modules_dir(release)}/kernel",
            f"{modules_dir(release)}/updates/dkms",
        }
    )


def write_skeleton(base: Path, release: str) -> None:
    """Write the skeleton into the lab layer `base` (a directory that becomes /), with the
    Ubuntu kernel `release` installed and booted."""
    for rel in (
        *DIRECTORIES,
        f"{modules_dir(release)}/kernel",
        f"{modules_dir(release)}/updates/dkms",
    ):
        (base / rel).mkdir(mode=0o755, parents=True, exist_ok=True)
    for rel, text in {**FILES, **kernel_files(release)}.items():
        path = base / rel
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        path.write_text(text)
        os.chmod(path, 0o600 if rel.startswith("boot/System.map") else 0o644)
    for rel, target in kernel_links(release).items():
        link = base / rel
        if os.path.lexists(link):
            link.unlink()
        link.symlink_to(target)
