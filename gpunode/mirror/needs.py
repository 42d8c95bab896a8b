"""What each selected host's plan installs from NVIDIA's repositories (CUDA's, the container
toolkit's), with what apt takes; the Miniconda installer, and the pip and conda installs its
steps carry (`Packages`: an env's Python, its wheels, its environment.yml's and
requirements.txt's packages)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunode.changes import Change, HostPlan, Packages
from gpunode.events import Bus
from gpunode.execute.host import HostRun, Options
from gpunode.facts.gather import gather
from gpunode.facts.model import HostFacts
from gpunode.hostpool import run_hosts
from gpunode.inventory.model import Host
from gpunode.mirror.condachan import CondaSet, conda_set
from gpunode.mirror.fresh import fresh_plan
from gpunode.mirror.wheels import PipSet, platform_tag
from gpunode.plan.aptcheck import Target, closure, taken_version, targets
from gpunode.plan.mirrorcheck import pinned_by
from gpunode.repoindex import normalize_repo_url
from gpunode.resolve.index import RepoVersions, container_folder, repo_folder
from gpunode.resolve.packages import Catalog
from gpunode.resolve.resolver import IndexUnavailable
from gpunode.transport.base import Transport
from gpunode.transport.secret import Secret

KEYRING = "cuda-keyring"  # the trust anchor the nvidia_repo role fetches by its file's URL
CONTAINER = "libnvidia-container/"  # repos.nvidia_container's folder in the mirror


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
    keys: dict[str, str] = field(default_factory=dict)  # rel -> upstream URL, not pinned
    pip: set[PipSet] = field(default_factory=set)
    conda: set[CondaSet] = field(default_factory=set)
    problems: dict[str, str] = field(default_factory=dict)  # host -> why it adds nothing


def fleet_needs(
    hosts: Sequence[Host],
    versions: RepoVersions,
    options: Options,
    *,
    forks: int | None = None,
    become_password: Secret | None = None,
    whole_stack: bool = False,
) -> Needs:
    """Each host read and planned exactly as `gpunode plan` does (one round trip), then
    what its plan asks apt for at a version, followed through the index's Depends.
    `whole_stack`: each host's facts planned as a fresh host's (gpunode.mirror.fresh)."""
    bus = Bus()

    def work(transport: Transport, host: Host) -> tuple[HostFacts, HostPlan]:
        if whole_stack:
            facts = gather(transport, host, timeout=options.facts_timeout)
            return facts, fresh_plan(host, facts, options)
        return HostRun(transport, host, bus, options).read()

    out = Needs()
    plans = run_hosts(hosts, work, bus=bus, forks=forks, become_password=become_password)
    by_name = {h.name: h for h in hosts}
    for name, outcome in plans.items():
        if outcome.value is None:
            out.problems[name] = outcome.summary
            continue
        facts, plan = outcome.value
        if plan.refused:
            out.problems[name] = f"refused: {plan.refused}"
            continue
        try:
            _host_needs(out, by_name[name], facts, plan, versions)
        except IndexUnavailable as exc:
            out.problems[name] = f"cannot read the repository's index: {exc}"
    return out


def _host_needs(
    out: Needs, host: Host, facts: HostFacts, plan: HostPlan, versions: RepoVersions
) -> None:
    for fetch in (f for c in plan.changes for s in c.steps for f in s.fetches):
        file = fetch.url.rsplit("/", 1)[-1]
        if file not in ("", ".", ".."):
            rel = "miniconda/" + file
            whose = pinned_by(host, fetch)
            out.files[rel] = Download(fetch.url, rel, fetch.sha256, whose)
    for change in plan.changes:
        for takes in change.packages:
            if takes.tool == "conda" and takes.specs:
                out.conda.add(conda_set(takes, host, facts))
            elif takes.tool == "pip" and takes.specs:
                out.pip.update(pip_sets(change.title, takes, host, facts, out.problems))
    sources: list[tuple[Catalog, Folder]] = []
    if host.repos.nvidia:
        url = normalize_repo_url(repo_folder(host.repos.nvidia, facts))
        cat = versions.catalog(url)
        folder = out.folders.setdefault(url, Folder(url, f"{facts.os.repo_slug}/x86_64/"))
        folder.packages.update((KEYRING, v) for v in cat.versions(KEYRING))
        sources.append((cat, folder))
    container = host.repos.nvidia_container
    if container and host.stack.containers is not None:
        url = normalize_repo_url(container_folder(container))
        folder = out.folders.setdefault(url, Folder(url, CONTAINER + "stable/deb/amd64/"))
        # its signing key, checked on the host by repos.nvidia_container_key_fingerprint
        out.keys[CONTAINER + "gpgkey"] = container.rstrip("/") + "/gpgkey"
        sources.append((versions.catalog(url), folder))
    for _, folder in sources:
        folder.hosts.append(host.name)
    for change in plan.changes:
        named = _named(change, sources[0][0]) if host.repos.nvidia and sources else []
        for t in [*targets(change), *named]:
            source = next(((c, f) for c, f in sources if c.versions(t.name)), None)
            taken = taken_version(source[0], t) if source else None
            if source is None or taken is None:
                continue  # Ubuntu's archive's, or refused by the plan already
            # as a fresh host would take it: what this host has installed, another needs
            source[1].packages.update(closure(source[0], t.name, taken, HostFacts()))


def pip_sets(
    title: str, takes: Packages, host: Host, facts: HostFacts, problems: dict[str, str]
) -> set[PipSet]:
    """A pip install of a plan's step (its `Packages`, as the op built it), with the
    mirror's index its index URL maps to; none, and a problem, when no index serves it."""
    if takes.unmirrorable:
        problems[host.name] = f"{title}: {takes.unmirrorable}: a mirror cannot serve it"
        return set()
    index = _pip_index(takes.index_url, host)
    if index is None:
        problems[host.name] = (
            f"{title}: pip's index {takes.index_shown} is neither"
            " repos.pytorch_index nor repos.pypi_index: its wheels are not mirrored"
        )
        return set()
    _, _, name = takes.env.rpartition("/envs/")  # PREFIX/envs/ENV
    conda = host.stack.conda
    python = conda.envs[name].python if conda and name in conda.envs else None
    tag = platform_tag(facts.os.repo_slug)
    return {PipSet(index, takes.index_url, takes.extra_index_url, takes.specs, python, tag)}


def _pip_index(url: str | None, host: Host) -> str | None:
    """The mirror's index for an upstream index URL: `simple` for repos.pypi_index (or
    pip's default), `pytorch/<variant>` below repos.pytorch_index; None for another."""
    pypi = (host.repos.pypi_index or "").rstrip("/")
    if url is None or url.rstrip("/") == pypi:
        return "simple"
    base = host.repos.pytorch_index.rstrip("/") + "/"
    rest = url.rstrip("/").removeprefix(base)
    safe = re.fullmatch(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*", rest)
    if url.startswith(base) and safe and ".." not in rest.split("/"):
        return f"pytorch/{rest}"
    return None


def _named(change: Change, cat: Catalog) -> list[Target]:
    """Packages of the index a step's shell names without a version (the kernel headers'
    step installs those apt offers): apt takes the newest, from the mirror when it lists
    them. A name the step only reads costs a file in the mirror, never a failed apt."""
    words = {w for s in change.steps for w in _WORD.findall(s.command)}
    return [Target(w, None) for w in sorted(words) if cat.versions(w)]


_WORD = re.compile(r"(?<![\w/=.+-])[a-z0-9][a-z0-9+.-]*[a-z0-9+](?![\w/=.+-])")
