"""Versions as the host's own apt sees them: for when the controller cannot read the
repository's index (a proxy or an air-gapped mirror only the hosts reach)."""

from __future__ import annotations

from shlex import quote as q

NAMES_MAX = 64


def madison_command(names: tuple[str, ...]) -> str:
    """One read-only command: every version each package has in the host's apt lists."""
    return "LC_ALL=C apt-cache madison " + " ".join(q(n) for n in names[:NAMES_MAX])


class HostCatalog:
    """A Catalog over `apt-cache madison` output, limited to one repository's folder (the
    host's answer covers every folder apt knows: Ubuntu's own NVIDIA packages, and each
    repository gpunode added, which each read their own)."""

    def __init__(self, madison: str, folder: str) -> None:
        self.folder = folder.rstrip("/")
        self._versions: dict[str, list[str]] = {}
        for line in madison.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 3 or parts[2].split(" ")[0].rstrip("/") != self.folder:
                continue
            if parts[1] not in self._versions.setdefault(parts[0], []):
                self._versions[parts[0]].append(parts[1])

    @property
    def where(self) -> str:
        return self.folder + "/"

    @property
    def how(self) -> str:
        return "read by the host's apt, apt-cache madison"

    def versions(self, name: str) -> list[str]:
        return list(self._versions.get(name, []))

    def names(self) -> list[str]:
        return sorted(self._versions)
