"""Versions as the host's own apt sees them: for when the controller cannot read the
repository's index (a proxy or an air-gapped mirror only the hosts reach)."""

from __future__ import annotations

from shlex import quote as q

NAMES_MAX = 64


def madison_command(names: tuple[str, ...]) -> str:
    """One read-only command: every version each package has in the host's apt lists."""
    return "LC_ALL=C apt-cache madison " + " ".join(q(n) for n in names[:NAMES_MAX])


class HostCatalog:
    """A Catalog over `apt-cache madison` output, limited to one repository folder (the
    host may also see Ubuntu's own NVIDIA packages, which are not what it was asked for)."""

    def __init__(self, madison: str, folder: str) -> None:
        self.folder = folder.rstrip("/")
        self._lines: list[tuple[str, str, str]] = []  # (folder, name, version), every folder
        self._versions: dict[str, list[str]] = {}
        for line in madison.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 3:
                continue
            self._lines.append((parts[2].split(" ")[0].rstrip("/"), parts[0], parts[1]))
        self._fill()

    def _fill(self) -> None:
        for where, name, version in self._lines:
            if where == self.folder and version not in self._versions.setdefault(name, []):
                self._versions[name].append(version)

    def under(self, url: str) -> HostCatalog:
        """The same answer, limited to another repository's folder under `url` (the
        libnvidia-container repository's `stable/deb/amd64`)."""
        base = url.rstrip("/") + "/"
        folders = sorted({f for f, _, _ in self._lines if f.startswith(base)})
        view = HostCatalog("", folders[0] if folders else base)
        view._lines = self._lines
        view._fill()
        return view

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
