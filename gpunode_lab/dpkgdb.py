"""What dpkg and apt say on a lab host: a real Ubuntu host's database and apt settings.

A host's files come from the machine running the lab, but its dpkg database and apt's
configuration should not: `dpkg -l` on a lab host lists what an Ubuntu host of its release
had, and apt runs with the settings Ubuntu's packages ship, whatever the machine has
installed or configured. Both come from captures (captures/README.md) of an H200 host on
Ubuntu 24.04. The database is left without what NVIDIA's repository put there, so that
every host starts with no GPU stack; a release with no capture keeps a frozen copy of the
machine's database.
"""

from __future__ import annotations

import re
import tarfile
from importlib import resources
from pathlib import Path, PurePosixPath

CAPTURES = {"24.04": "ubuntu-24.04-dpkg.tar.xz"}
# apt's and debconf's own files in /etc/apt (the same files on 22.04) and ubuntu-keyring's keys
APT_CONFIG = "ubuntu-24.04-apt.tar.xz"

# Everything NVIDIA's CUDA repository publishes names this maintainer (cudatools@nvidia.com);
# Ubuntu's own packages never do, not even its NVIDIA ones (libxnvctrl0 stays).
_NVIDIA_MAINTAINER = re.compile(r"^Maintainer:.*@nvidia\.com>?\s*$", re.M)
_PACKAGE = re.compile(r"^Package: (\S+)$", re.M)
_ROOTS = ("var/lib/dpkg/", "var/lib/apt/extended_states", "etc/apt/")
_SCRIPTS = {"preinst", "postinst", "prerm", "postrm", "config"}


def has_capture(ubuntu: str) -> bool:
    return ubuntu in CAPTURES


def _stanzas(text: str) -> list[str]:
    return [s for s in text.split("\n\n") if s.strip()]


def _package_of(stanza: str) -> str:
    found = _PACKAGE.search(stanza)
    return found.group(1) if found else ""


def _nvidia_packages(status: str) -> set[str]:
    return {_package_of(s) for s in _stanzas(status) if _NVIDIA_MAINTAINER.search(s)}


def _without(text: str, dropped: set[str]) -> str:
    """A dpkg/apt stanza file (status, extended_states) without the stanzas of `dropped`."""
    kept = [s.strip("\n") for s in _stanzas(text) if _package_of(s) not in dropped]
    return "".join(f"{s}\n\n" for s in kept)


def _owner(info_name: str) -> str:
    # info/<package>[:<arch>].<kind>
    return info_name.rsplit(".", 1)[0].split(":", 1)[0]


def _alternative_paths(text: str) -> set[str]:
    return {line for line in text.splitlines() if line.startswith("/")}


def install(base: Path, ubuntu: str) -> None:
    """Write the captured database of `ubuntu` under `base` (a directory that becomes /)."""
    files = capture(CAPTURES[ubuntu])
    status = files.pop("var/lib/dpkg/status").decode()
    dropped = _nvidia_packages(status)
    dropped_paths: set[str] = set()
    for name, data in files.items():
        path = PurePosixPath(name)
        if path.parent.name == "info" and path.suffix == ".list" and _owner(path.name) in dropped:
            dropped_paths.update(data.decode().splitlines())
    out = {"var/lib/dpkg/status": _without(status, dropped).encode()}
    for name, data in files.items():
        path = PurePosixPath(name)
        if path.parent.name == "info" and _owner(path.name) in dropped:
            continue
        if path.parent.name == "alternatives" and _alternative_paths(data.decode()) & dropped_paths:
            continue  # a group only the dropped packages offered (cuda, cufile.json)
        if name == "var/lib/apt/extended_states":
            data = _without(data.decode(), dropped).encode()
        out[name] = data
    for rel in ("info", "updates", "triggers", "alternatives"):
        (base / "var/lib/dpkg" / rel).mkdir(mode=0o755, parents=True, exist_ok=True)
    for name in ("available", "statoverride"):
        out.setdefault(f"var/lib/dpkg/{name}", b"")
    _write_all(base, out)


def install_apt_config(base: Path) -> None:
    """Write Ubuntu's own files in /etc/apt (APT_CONFIG) under `base`."""
    _write_all(base, capture(APT_CONFIG))


def capture(name: str) -> dict[str, bytes]:
    """The regular files of a capture archive, by their path relative to /."""
    archive = resources.files("gpunode_lab") / "captures" / name
    # as a stream, read once: members of an xz tar read after getmembers() decompress it again
    with archive.open("rb") as raw, tarfile.open(fileobj=raw, mode="r|xz") as tar:
        return {m.name: _read(tar, m) for m in tar if m.isfile() and _wanted(m.name)}


def _wanted(name: str) -> bool:
    path = PurePosixPath(name)
    return name.startswith(_ROOTS) and ".." not in path.parts and not path.is_absolute()


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    if handle is None:
        raise ValueError(f"{member.name}: not a regular file in the capture")
    return handle.read()


def _write_all(base: Path, files: dict[str, bytes]) -> None:
    made: set[Path] = set()
    for name, data in sorted(files.items()):
        path = base / name
        if path.parent not in made:
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_bytes(data)
        path.chmod(0o755 if path.suffix.lstrip(".") in _SCRIPTS else 0o644)
