"""Ubuntu's kernel packages and dkms, as the lab's hosts need them to build a DKMS driver.

linux-image-<k> installs a kernel and points /boot/vmlinuz at it (the next boot loads it),
linux-headers-<k> the headers DKMS builds against (/lib/modules/<k>/build), and dkms a
stand-in of dkms(8) that "builds" a module only for a kernel whose headers are installed.
As on Ubuntu, installing a kernel or its headers runs `dkms autoinstall` for it.
"""

from __future__ import annotations

from importlib import resources

from gpunode_lab.repo import nvidia_repo
from gpunode_lab.repo.deb import Package, Payload

DKMS_VERSION = "3.0.11-1ubuntu13"


def boot_kernel() -> str:
    """The Ubuntu kernel every lab host boots first, installed with its image (the first
    of the lab's data), whatever kernel the machine running the lab has."""
    return next(iter(nvidia_repo.kernels()))


def newer_kernel() -> str:
    """The kernel `newer-kernel` installs: the last the lab's data lists."""
    return list(nvidia_repo.kernels())[-1]


def _autoinstall(release: str) -> str:
    # Ubuntu's /etc/kernel/postinst.d/dkms and header_postinst.d/dkms: never fail the package
    return (
        f"if [ -x /usr/sbin/dkms ]; then /usr/sbin/dkms autoinstall -k {release}"
        f' || echo "dkms: autoinstall for kernel {release} failed" >&2; fi\n'
    )


def image_package(release: str, version: str) -> Package:
    mods = f"/lib/modules/{release}"
    postinst = (
        "#!/bin/sh\nset -e\n"
        'if [ "$1" = configure ]; then\n'
        # update-initramfs and linux-base's links: the newest kernel boots next
        f'  echo "gpunode lab: stand-in initramfs" > /boot/initrd.img-{release}\n'
        f"  ln -sfn vmlinuz-{release} /boot/vmlinuz\n"
        f"  ln -sfn initrd.img-{release} /boot/initrd.img\n"
        f"  {_autoinstall(release)}"
        "fi\n"
    )
    return Package(
        f"linux-image-{release}",
        version,
        f"Signed kernel image generic\n Stand-in Linux kernel {release}.",
        section="main/kernel",
        files=[
            Payload(f"/boot/vmlinuz-{release}", b"gpunode lab: stand-in kernel image\n", 0o600),
            Payload(f"/boot/config-{release}", b"CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n"),
            Payload(f"/boot/System.map-{release}", b"", 0o600),
            Payload(f"{mods}/modules.order"),
            Payload(f"{mods}/modules.builtin"),
            Payload(f"{mods}/kernel/.gpunode-lab"),
        ],
        scripts={"postinst": postinst},
    )


def headers_package(release: str, version: str) -> Package:
    src = f"/usr/src/linux-headers-{release}"
    postinst = (
        "#!/bin/sh\nset -e\n" + f'if [ "$1" = configure ]; then\n  {_autoinstall(release)}fi\n'
    )
    return Package(
        f"linux-headers-{release}",
        version,
        f"Linux kernel headers for version {release}\n Stand-in headers DKMS builds against.",
        section="main/devel",
        files=[
            Payload(f"{src}/Makefile", f"# stand-in kernel Makefile for {release}\n".encode()),
            Payload(
                f"{src}/include/generated/utsrelease.h",
                f'#define UTS_RELEASE "{release}"\n'.encode(),
            ),
            Payload(f"/lib/modules/{release}/build", symlink=src),
        ],
        scripts={"postinst": postinst},
    )


def dkms_package() -> Package:
    script = (resources.files("gpunode_lab.repo") / "dkms_standin.sh").read_bytes()
    return Package(
        "dkms",
        DKMS_VERSION,
        "Dynamic Kernel Module System (DKMS)\n Stand-in dkms: builds need the kernel's headers.",
        architecture="all",
        section="main/kernel",
        files=[Payload("/usr/sbin/dkms", script, 0o755)],
    )


def kernel_packages() -> list[Package]:
    out = [dkms_package()]
    for release, version in nvidia_repo.kernels().items():
        if release != boot_kernel():  # the image's own
            out.append(image_package(release, version))
        out.append(headers_package(release, version))
    return out
