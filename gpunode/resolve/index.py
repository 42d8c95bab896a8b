"""The controller's view of the repositories a run uses: each index read once per run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpunode.repoindex.fetch import FetchedIndex, IndexCache
from gpunode.repoindex.fetch import IndexUnavailable as FetchFailed

if TYPE_CHECKING:  # the command's start builds a RepoVersions: the resolver comes later
    from gpunode.facts.model import HostFacts
    from gpunode.repoindex.packages import PackageVersion
    from gpunode.resolve.packages import Catalog
    from gpunode.resolve.resolver import CatalogFor, Sizes

ARCH = "amd64"  # NVIDIA's x86_64 folders; arch "all" packages count too


class IndexCatalog:
    """A Catalog over one fetched Packages index."""

    def __init__(
        self, fetched: FetchedIndex, manifest: Callable[[], dict[str, str] | None] | None = None
    ) -> None:
        self.fetched = fetched
        self._manifest = manifest  # a gpunode mirror's list of the files it holds

    @property
    def where(self) -> str:
        return self.fetched.repo_url

    @property
    def how(self) -> str:
        f = self.fetched
        return f"{f.index_url.rsplit('/', 1)[-1]}, {f.source}"

    def versions(self, name: str) -> list[str]:
        return list(self.fetched.index.version_strings(name, ARCH))

    def names(self) -> list[str]:
        return list(self.fetched.index.names())

    def depends(self, name: str, version: str) -> str | None:
        """The raw Depends field of `name` at `version`; None when the index lacks it."""
        found = self._stanza(name, version)
        return found.depends if found else None

    def sizes(self, name: str, version: str) -> Sizes | None:
        """Installed-Size and Size of `name` at `version`; None when the index lacks it."""
        from gpunode.resolve.resolver import Sizes

        found = self._stanza(name, version)
        return Sizes(found.installed_size, found.size) if found else None

    def lacks(self, name: str, version: str) -> str | None:
        """The file of `name` at `version` when this folder is a gpunode mirror that does not
        hold it (its manifest says so: the signed index lists every upstream file); else None."""
        held = self._manifest() if self._manifest else None
        found = self._stanza(name, version)
        if held is None or found is None or not found.filename:
            return None
        return None if held.get(found.filename) == found.sha256 else found.filename

    def _stanza(self, name: str, version: str) -> PackageVersion | None:
        for v in self.fetched.index.versions(name, ARCH):
            if v.version == version:
                return v
        return None


class RepoVersions:
    """Hands each host the index of the repository folder it uses; hosts that share a
    folder share one download (IndexCache fetches each URL once, for every thread)."""

    def __init__(self, cache: IndexCache | None = None, *, allow_stale: bool = False) -> None:
        self.cache = cache or IndexCache()
        self.allow_stale = allow_stale

    def catalog(self, url: str) -> Catalog:
        try:
            fetched = self.cache.get(url, allow_stale=self.allow_stale)
            return IndexCatalog(fetched, lambda: self.cache.mirror_manifest(url))
        except FetchFailed as exc:
            from gpunode.resolve.resolver import IndexUnavailable

            raise IndexUnavailable(str(exc)) from None

    def mirror_files(self, folder_url: str) -> dict[str, str] | None:
        """A gpunode mirror's manifest of a folder outside apt (miniconda/, a pip index)."""
        return self.cache.mirror_manifest(folder_url)

    def catalog_for(self, nvidia: str | None, facts: HostFacts) -> CatalogFor | None:
        if not nvidia:
            return None
        url = repo_folder(nvidia, facts)
        return lambda: self.catalog(url)

    def container_catalog_for(self, nvidia_container: str | None) -> CatalogFor | None:
        if not nvidia_container:
            return None
        url = container_folder(nvidia_container)
        return lambda: self.catalog(url)


def repo_folder(nvidia: str, facts: HostFacts) -> str:
    """NVIDIA's folder for the host's release, as the nvidia_repo role configures it."""
    return f"{nvidia.rstrip('/')}/{facts.os.repo_slug}/x86_64/"


def container_folder(nvidia_container: str) -> str:
    """libnvidia-container's folder for x86_64 hosts, as the container_toolkit role names it
    (`stable/deb/$(ARCH)`, which apt expands to amd64)."""
    return f"{nvidia_container.rstrip('/')}/stable/deb/{ARCH}/"
