"""Ubuntu's archive as the lab models it for NVIDIA's driver: ubuntu_archive.yaml's
releases and per-kernel signed modules, as packages with Ubuntu's names and shapes, in a
`dists/<codename>-updates/restricted` tree signed with a key of its own.

The modules packages ship /lib/modules/<kernel>/kernel/nvidia-<branch>/nvidia.ko signed by
Canonical's key, which the lab's kernel trusts under Secure Boot (hostinit.module_state).
"""

from __future__ import annotations

import gzip
import hashlib
import time
from email.utils import formatdate
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from gpunode_lab.repo.catalog_driver import smi_script
from gpunode_lab.repo.deb import LIBDIR, Package, Payload, control_text, deb_bytes
from gpunode_lab.repo.nvidia_repo import kernels
from gpunode_lab.state import UBUNTU

DATA_FILE = "ubuntu_archive.yaml"
COMPONENT = "restricted"
KEYRING = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
SOURCES = "/etc/apt/sources.list.d/ubuntu.sources"
CANONICAL = "Canonical Ltd. Kernel Module Signing"
FLAVORS = ("open", "proprietary")


@cache
def data() -> dict[str, Any]:
    from ruamel.yaml import YAML

    text = (resources.files("gpunode_lab.repo") / DATA_FILE).read_text(encoding="utf-8")
    doc: dict[str, Any] = YAML(typ="safe", pure=True).load(text)
    return doc


def suite(ubuntu: str) -> str:
    return f"{UBUNTU[ubuntu]}-updates"


def sources(base_url: str, ubuntu: str) -> str:
    """The deb822 source a host has for Ubuntu's archive (as /etc/apt/sources.list.d/
    ubuntu.sources on 24.04)."""
    return (
        f"Types: deb\nURIs: {base_url.rstrip('/')}/ubuntu\nSuites: {suite(ubuntu)}\n"
        f"Components: {COMPONENT}\nSigned-By: {KEYRING}\n"
    )


def _flavoured(name: str, flavor: str) -> str:
    return f"{name}-open" if flavor == "open" else name


def _module_dir(branch: str, flavor: str) -> str:
    """nvidia-570srv-open: the folder under /lib/modules/<kernel>/kernel/."""
    return _flavoured(f"nvidia-{branch.replace('-server', 'srv')}", flavor)


def packages(ubuntu: str) -> list[Package]:
    out: list[Package] = []
    for branch, entry in data()["branches"].items():
        for release, builds in entry["releases"].items():
            for n in builds:
                out += _release(str(branch), str(entry["cuda"]), str(release), ubuntu, int(n))
    versions = kernels()
    for kernel, per_branch in data()["modules"].items():
        k = str(kernel)
        for branch, (release, n) in per_branch.items():
            for flavor in FLAVORS:
                out.append(_modules(str(branch), k, f"{versions[k]}+{n}", str(release), flavor))
    for name, by_release in data().get("main", {}).items():
        if ubuntu in by_release:
            out.append(Package(
                str(name), str(by_release[ubuntu]), f"{name}\n Stand-in of Ubuntu's {name}.",
                section="utils", files=[Payload(f"/usr/bin/{name}", b"#!/bin/sh\nexit 0\n", 0o755)],
            ))  # fmt: skip
    return out


def _release(branch: str, cuda: str, release: str, ubuntu: str, n: int) -> list[Package]:
    v = f"{release}-0ubuntu0.{ubuntu}.{n}"
    compute, common = f"libnvidia-compute-{branch}", f"nvidia-kernel-common-{branch}"
    pinned = [f"{compute} (= {v})", f"{common} (= {v})", f"nvidia-compute-utils-{branch} (= {v})"]
    out = [
        Package(
            compute, v, f"NVIDIA libcompute package\n Ubuntu's build of {release}.",
            section="restricted/libs",
            files=[Payload(f"{LIBDIR}/libcuda.so.{release}"),
                   Payload(f"{LIBDIR}/libcuda.so.1", symlink=f"libcuda.so.{release}")],
        ),
        Package(
            common, v, f"Shared files used with the kernel module\n GSP firmware of {release}.",
            section="restricted/libs",
            files=[Payload(f"/lib/firmware/nvidia/{release}/gsp_ga10x.bin")],
        ),
        Package(
            f"nvidia-utils-{branch}", v, f"NVIDIA driver support binaries\n nvidia-smi {release}.",
            section="restricted/utils",
            depends=[f"{compute} (= {v})"],
            files=[Payload("/usr/bin/nvidia-smi", smi_script(release, cuda), 0o755)],
        ),
        Package(
            f"nvidia-compute-utils-{branch}", v, "NVIDIA compute utilities\n persistenced.",
            section="restricted/utils",
            depends=[f"{compute} (= {v})"],
            files=[Payload("/usr/bin/nvidia-persistenced", b"#!/bin/sh\nexit 0\n", 0o755)],
        ),
    ]  # fmt: skip
    for flavor in FLAVORS:
        headless = _flavoured(f"nvidia-headless-no-dkms-{branch}", flavor)
        other = _flavoured(f"nvidia-headless-no-dkms-{branch}", FLAVORS[flavor == "open"])
        out.append(Package(
            headless, v,
            f"NVIDIA headless metapackage - no DKMS\n Driver {release}, modules from"
            " linux-modules-nvidia-* (signed, precompiled).",
            section="restricted/metapackages", depends=pinned,
            conflicts=[other], replaces=[other],
        ))  # fmt: skip
        out.append(Package(
            _flavoured(f"nvidia-driver-{branch}", flavor), v,
            f"NVIDIA driver metapackage\n Driver {release} with its desktop parts.",
            section="restricted/metapackages",
            depends=[f"{headless} (= {v})", f"nvidia-utils-{branch} (= {v})"],
        ))  # fmt: skip
    return out


def _modules(branch: str, kernel: str, version: str, release: str, flavor: str) -> Package:
    folder = f"/lib/modules/{kernel}/kernel/{_module_dir(branch, flavor)}"
    ko = f"gpunode lab stand-in nvidia.ko {release} {flavor}\nsigner: {CANONICAL}\n"
    return Package(
        _flavoured(f"linux-modules-nvidia-{branch}", flavor) + f"-{kernel}",
        version,
        f"Linux kernel nvidia modules for version {kernel}\n Signed, precompiled modules"
        f" built from {release}.",
        section="restricted/kernel",
        depends=[f"nvidia-kernel-common-{branch} (>= {release})"],
        files=[Payload(f"{folder}/nvidia.ko", ko.encode())],
    )


def build(root: Path, signer: Any, keyring: bytes) -> None:
    """root/ubuntu: pool/ and dists/<suite>/ for every Ubuntu release the lab runs."""
    top = root / "ubuntu"
    pool = top / "pool" / COMPONENT
    pool.mkdir(parents=True)
    (top / "ubuntu-archive-keyring.gpg").write_bytes(keyring)
    for ubuntu in UBUNTU:
        entries = []
        for p in sorted(packages(ubuntu), key=lambda p: (p.name, p.version)):
            blob = deb_bytes(p)
            if not (pool / p.filename).exists():
                (pool / p.filename).write_bytes(blob)
            entries.append(_entry(p, blob, f"pool/{COMPONENT}/{p.filename}"))
        dist = top / "dists" / suite(ubuntu)
        binary = dist / COMPONENT / "binary-amd64"
        binary.mkdir(parents=True)
        index = "\n".join(entries).encode()
        (binary / "Packages").write_bytes(index)
        (binary / "Packages.gz").write_bytes(gzip.compress(index, mtime=0))
        _release_file(dist, ubuntu)
        signer.sign_release(dist)


def _entry(p: Package, blob: bytes, filename: str) -> str:
    fields = p.control_fields()
    desc = fields.pop()  # Description last, after the file's checksums
    sha = hashlib.sha256(blob).hexdigest()
    return control_text([*fields, ("Filename", filename), ("Size", str(len(blob))),
                         ("SHA256", sha), desc])  # fmt: skip


def _release_file(dist: Path, ubuntu: str) -> None:
    lines = [
        "Origin: Ubuntu",
        "Label: Ubuntu (gpunode lab stand-in)",
        f"Suite: {suite(ubuntu)}",
        f"Version: {ubuntu}",
        f"Codename: {UBUNTU[ubuntu]}",
        f"Date: {formatdate(time.time(), usegmt=True)}",
        "Architectures: amd64",
        f"Components: {COMPONENT}",
        "SHA256:",
    ]
    for rel in (f"{COMPONENT}/binary-amd64/Packages", f"{COMPONENT}/binary-amd64/Packages.gz"):
        blob = (dist / rel).read_bytes()
        lines.append(f" {hashlib.sha256(blob).hexdigest()} {len(blob):>16} {rel}")
    (dist / "Release").write_text("\n".join(lines) + "\n")
