"""What each selected host's plan installs from NVIDIA's repository, with what apt takes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunode.changes import Change, HostPlan
from gpunode.events import Bus
from gpunode.execute.host import HostRun, Options
from gpunode.facts.model import HostFacts
from gpunode.hostpool import run_hosts
from gpunode.inventory.model import Host
from gpunode.plan.aptcheck import Target, closure, taken_version, targets
from gpunode.repoindex import normalize_repo_url
from gpunode.resolve import Catalog, IndexUnavailable
from gpunode.resolve.index import RepoVersions, repo_folder
from gpunode.transport.base import Transport
from gpunode.transport.secret import Secret

KEYRING = "cuda-keyring"  # the trust anchor the nvidia_repo role fetches by its file's URL


@dataclass
class Folder:
    """One repository folder the fleet uses, and the packages to mirror from it."""

    url: str  # upstream, with a trailing slash
    rel: str  # where it goes under the mirror's root: ubuntu2204/x86_64/
    packages: set[tuple[str, str]] = field(default_factory=set)  # (name, version)
    hosts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Download:
    """A file outside NVIDIA's repository, pinned by its SHA256."""

    url: str
    rel: str  # under the mirror's root: miniconda/Miniconda3-....sh
    sha256: str
    whose: str  # where the SHA256 comes from, for messages


@dataclass
class Needs:
    folders: dict[str, Folder] = field(default_factory=dict)  # by upstream URL
    files: dict[str, Download] = field(default_factory=dict)  # by rel
    problems: dict[str, str] = field(default_factory=dict)  # host -> why it adds nothing


def fleet_needs(
    hosts: Sequence[Host],
    versions: RepoVersions,
    options: Options,
    *,
    forks: int | None = None,
    become_password: Secret | None = None,
) -> Needs:
    """Each host read and planned exactly as `gpunode plan` does (one round trip), then
    what its plan asks apt for at a version, followed through the index's Depends."""
    bus = Bus()

    def work(transport: Transport, host: Host) -> tuple[HostFacts, HostPlan]:
        return HostRun(transport, host, bus, options).read()

    out = Needs()
    plans = run_hosts(hosts, work, bus=bus, forks=forks, become_password=become_password)
    by_name = {h.name: h for h in hosts}
    for name, outcome in plans.items():
        if outcome.value is None:
            out.problems[name] = outcome.summary
            continue
        facts, plan = outcome.value
        host = by_name[name]
        if plan.refused:
            out.problems[name] = f"refused: {plan.refused}"
            continue
        installer = host.repos.conda_installer
        name = installer.rsplit("/", 1)[-1]
        if name not in ("", ".", "..") and any(
            installer in s.command for c in plan.changes for s in c.steps
        ):
            rel = "miniconda/" + name
            sha = host.repos.conda_installer_sha256
            out.files[rel] = Download(installer, rel, sha, "repos.conda_installer_sha256")
        if not host.repos.nvidia:
            out.problems[name] = "repos.nvidia is null: nothing of NVIDIA's to mirror"
            continue
        url = normalize_repo_url(repo_folder(host.repos.nvidia, facts))
        try:
            cat = versions.catalog(url)
        except IndexUnavailable as exc:
            out.problems[name] = f"cannot read the repository's index: {exc}"
            continue
        folder = out.folders.setdefault(url, Folder(url, f"{facts.os.repo_slug}/x86_64/"))
        folder.hosts.append(name)
        folder.packages.update((KEYRING, v) for v in cat.versions(KEYRING))
        for change in plan.changes:
            for t in [*targets(change), *_named(change, cat)]:
                taken = taken_version(cat, t) if cat.versions(t.name) else None
                if taken is None:
                    continue  # Ubuntu's archive's, or refused by the plan already
                # as a fresh host would take it: what this host has installed, another needs
                folder.packages.update(closure(cat, t.name, taken, HostFacts()))
    return out


def _named(change: Change, cat: Catalog) -> list[Target]:
    """Packages of the index a step's shell names without a version (the kernel headers'
    step installs those apt offers): apt takes the newest, from the mirror when it lists
    them. A name the step only reads costs a file in the mirror, never a failed apt."""
    words = {w for s in change.steps for w in _WORD.findall(s.command)}
    return [Target(w, None) for w in sorted(words) if cat.versions(w)]


_WORD = re.compile(r"(?<![\w/=.+-])[a-z0-9][a-z0-9+.-]*[a-z0-9+](?![\w/=.+-])")
