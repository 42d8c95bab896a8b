"""A small, fast .deb writer: an ar archive of debian-binary, control.tar.gz, data.tar.gz.

dpkg-deb would fork a process and compress with xz per package; hundreds of stand-in
packages with tiny payloads build in well under a second this way.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field

from gpunode_lab.repo import padding

LIBDIR = "/usr/lib/x86_64-linux-gnu"  # where the packages put their libraries

MTIME = 1_700_000_000  # fixed, so rebuilt packages are byte-identical


@dataclass
class Payload:
    path: str  # absolute path inside the target root, e.g. /usr/bin/nvidia-smi
    data: bytes = b""
    mode: int = 0o644
    symlink: str | None = None


@dataclass
class Package:
    name: str
    version: str
    description: str
    architecture: str = "amd64"
    depends: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    replaces: list[str] = field(default_factory=list)
    breaks: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    section: str = "multiverse/devel"
    files: list[Payload] = field(default_factory=list)
    scripts: dict[str, str] = field(default_factory=dict)  # postinst, prerm, postrm, preinst
    conffiles: list[str] = field(default_factory=list)

    @property
    def filename(self) -> str:
        # as Debian's pools name them: without the epoch (DCGM's 1:4.5.2-1)
        return f"{self.name}_{self.version.split(':', 1)[-1]}_{self.architecture}.deb"

    def control_fields(self) -> list[tuple[str, str]]:
        size_kib = max(1, sum(len(f.data) for f in self.files) // 1024)
        out = [
            ("Package", self.name),
            ("Version", self.version),
            ("Architecture", self.architecture),
            ("Maintainer", "gpunode lab (stand-in for NVIDIA) <lab@gpunode.invalid>"),
            ("Installed-Size", str(size_kib)),
        ]
        for key, rel in (
            ("Depends", self.depends),
            ("Conflicts", self.conflicts),
            ("Breaks", self.breaks),
            ("Replaces", self.replaces),
            ("Provides", self.provides),
        ):
            if rel:
                out.append((key, ", ".join(rel)))
        out += [
            ("Section", self.section),
            ("Priority", "optional"),
            ("Homepage", "https://developer.nvidia.com/cuda-zone"),
        ]
        first, *rest = self.description.strip().splitlines() or [self.name]
        body = [" " + (ln.strip() or ".") for ln in rest]
        body.append(
            " Stand-in package built by gpunode's simulated lab: no NVIDIA software inside."
        )
        out.append(("Description", first + "\n" + "\n".join(body)))
        return out


def control_text(fields: list[tuple[str, str]]) -> str:
    return "".join(f"{k}: {v}\n" for k, v in fields)


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = MTIME
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = MTIME
    info.uname = info.gname = "root"
    tar.addfile(info)


def _targz(build: Callable[[tarfile.TarFile], None]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        build(tar)
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=MTIME)


def _data_tar(pkg: Package) -> bytes:
    def build(tar: tarfile.TarFile) -> None:
        _add_dir(tar, "./")
        seen: set[str] = set()
        for f in sorted(pkg.files, key=lambda p: p.path):
            parts = f.path.strip("/").split("/")
            for i in range(1, len(parts)):
                d = "./" + "/".join(parts[:i]) + "/"
                if d not in seen:
                    seen.add(d)
                    _add_dir(tar, d)
            name = "./" + "/".join(parts)
            if f.symlink is not None:
                info = tarfile.TarInfo(name)
                info.type = tarfile.SYMTYPE
                info.linkname = f.symlink
                info.mode = 0o777
                info.mtime = MTIME
                info.uname = info.gname = "root"
                tar.addfile(info)
            else:
                _add(tar, name, f.data, f.mode)

    return _targz(build)


def _control_tar(pkg: Package) -> bytes:
    def build(tar: tarfile.TarFile) -> None:
        _add_dir(tar, "./")
        _add(tar, "./control", control_text(pkg.control_fields()).encode(), 0o644)
        md5 = "".join(
            f"{hashlib.md5(f.data).hexdigest()}  {f.path.lstrip('/')}\n"
            for f in sorted(pkg.files, key=lambda p: p.path)
            if f.symlink is None
        )
        _add(tar, "./md5sums", md5.encode(), 0o644)
        if pkg.conffiles:
            _add(tar, "./conffiles", "".join(c + "\n" for c in pkg.conffiles).encode(), 0o644)
        for name, body in sorted(pkg.scripts.items()):
            _add(tar, "./" + name, body.encode(), 0o755)

    return _targz(build)


def _ar_member(name: str, data: bytes) -> bytes:
    header = f"{name:<16}{MTIME:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n"
    out = header.encode() + data
    return out + (b"\n" if len(data) % 2 else b"")


def deb_bytes(pkg: Package) -> bytes:
    data = (
        b"!<arch>\n"
        + _ar_member("debian-binary", b"2.0\n")
        + _ar_member("control.tar.gz", _control_tar(pkg))
        + _ar_member("data.tar.gz", _data_tar(pkg))
    )
    # the bandwidth benchmark only (bench/compare/coldlink.py sets it for its own lab)
    scale = int(os.environ.get("GPUNODE_LAB_PAD_SCALE") or 0)
    pad = padding.pad_bytes(pkg.name, pkg.version, len(data), scale)
    if pad <= 0:
        return data
    # zeros in a trailing member, which dpkg skips (deb(5)); 60 bytes: an ar header
    # (members align to 2 bytes: an even body, so the total is pad or pad - 1)
    return data + _ar_member("_gpunode-pad", bytes(max(0, pad - 60) & ~1))
