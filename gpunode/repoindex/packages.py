"""Parse an apt `Packages` index into an immutable model of names and published versions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpunode.versions import debian_key

# What dpkg accepts: optional numeric epoch, upstream starting with a digit, no colon
# without an epoch (split_debian would misread it as one).
_VERSION = re.compile(r"^(?:\d+:)?[0-9][A-Za-z0-9.+~-]*$")
_KEEP = frozenset(
    (
        "package",
        "version",
        "architecture",
        "provides",
        "depends",
        "filename",
        "size",
        "installed-size",
        "sha256",
    )
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*$")


@dataclass(frozen=True)
class PackageVersion:
    """One stanza: a version of a package as the repository publishes it."""

    name: str
    version: str
    architecture: str
    provides: str = ""  # raw field, e.g. "libnccl (= 2.26.2)"
    depends: str = ""  # raw field, folded lines joined with one space
    filename: str = ""
    size: int | None = None  # bytes of the .deb apt downloads
    sha256: str = ""
    installed_size: int | None = None  # KiB dpkg unpacks (the index's Installed-Size)


class PackageIndex:
    """Read-only: package name -> versions, each list in Debian version order (oldest first)."""

    __slots__ = ("_by_name", "_skipped")

    def __init__(self, by_name: Mapping[str, tuple[PackageVersion, ...]], skipped: int = 0) -> None:
        self._by_name: Mapping[str, tuple[PackageVersion, ...]] = MappingProxyType(
            {n: tuple(sorted(vs, key=lambda v: debian_key(v.version))) for n, vs in by_name.items()}
        )
        self._skipped = skipped

    @property
    def skipped(self) -> int:
        """Stanzas dropped for lacking a valid Package or Version."""
        return self._skipped

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._by_name))

    def __repr__(self) -> str:
        return f"<PackageIndex {len(self._by_name)} packages, {self.skipped} skipped>"

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_name))

    def versions(self, name: str, arch: str | None = None) -> tuple[PackageVersion, ...]:
        """Versions of `name`, oldest first; with `arch`, only that architecture and "all"."""
        found = self._by_name.get(name, ())
        if arch is None:
            return found
        return tuple(v for v in found if v.architecture in (arch, "all"))

    def version_strings(self, name: str, arch: str | None = None) -> tuple[str, ...]:
        """Distinct version strings of `name`, oldest first."""
        return tuple(dict.fromkeys(v.version for v in self.versions(name, arch)))

    def latest(self, name: str, arch: str | None = None) -> PackageVersion | None:
        found = self.versions(name, arch)
        return found[-1] if found else None

    def providers(self, virtual: str) -> tuple[str, ...]:
        """Names of packages whose Provides lists `virtual` (e.g. "libnccl" -> libnccl2)."""
        out = []
        for name, vs in self._by_name.items():
            if any(virtual in _provided_names(v.provides) for v in vs):
                out.append(name)
        return tuple(sorted(out))


def _provided_names(provides: str) -> set[str]:
    # "a (= 1), b:any" -> {"a", "b"}
    names = set()
    for item in provides.split(","):
        word = item.strip().split(" ", 1)[0].split("(", 1)[0]
        if word:
            names.add(word.split(":", 1)[0])
    return names


def _stanzas(text: str) -> Iterator[dict[str, str]]:
    fields: dict[str, str] = {}
    seen = False  # any line at all: an empty-looking stanza still counts as skipped
    last: str | None = None
    # splitlines: CRLF, lone CR, and a missing final newline all come out the same.
    for line in text.splitlines():
        if not line or line.isspace():
            if seen:
                yield fields
            fields, seen, last = {}, False, None
        elif line[0] in " \t":
            if last is not None:  # folded continuation of a kept field
                fields[last] = f"{fields[last]} {line.strip()}".strip()
        elif line[0] != "#":
            seen = True
            name, colon, value = line.partition(":")
            key = name.lower()  # field names are case-insensitive
            # Descriptions, checksums we do not use, repeats (the first wins): skipped
            # with their continuation lines, which are most of an index.
            last = key if colon and key in _KEEP and key not in fields else None
            if last is not None:
                fields[last] = value.strip()
    if seen:
        yield fields


def _count(text: str) -> int | None:
    """A size field's number; None when absent or not a plain decimal."""
    return int(text) if text.isascii() and text.isdigit() else None


def parse_packages(text: str) -> PackageIndex:
    """Parse a Packages index; stanzas lacking a valid Package or Version are counted, not kept.

    A stanza repeated with the same name, version and architecture is kept once (the first).
    """
    by_name: dict[str, dict[tuple[str, str], PackageVersion]] = {}
    skipped = 0
    for f in _stanzas(text):
        name, version = f.get("package", ""), f.get("version", "")
        if not _NAME.match(name) or not _VERSION.match(version):
            skipped += 1
            continue
        pv = PackageVersion(
            name=name,
            version=version,
            architecture=f.get("architecture", ""),
            provides=f.get("provides", ""),
            depends=f.get("depends", ""),
            filename=f.get("filename", ""),
            size=_count(f.get("size", "")),
            sha256=f.get("sha256", ""),
            installed_size=_count(f.get("installed-size", "")),
        )
        by_name.setdefault(name, {}).setdefault((version, pv.architecture), pv)
    return PackageIndex({n: tuple(vs.values()) for n, vs in by_name.items()}, skipped)
