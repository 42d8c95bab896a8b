"""A gpunode mirror's completeness for what a plan fetches outside apt: the Miniconda
installer, the packages its pip installs pin and the conda packages an env's `conda create`
or environment.yml pins from a channel given by URL; what the steps install is read from
their `Packages`, as the ops built them, never from the commands' text.

`gpunode mirror` writes a `gpunode-mirror.json` ({"files": {name: sha256}}) into each folder
it fills (miniconda/, simple/, pytorch/cu124/, a channel's linux-64/ and noarch/); a folder
without one (Anaconda's, PyPI, PyTorch's own index) is not checked. One small request per
folder and plan, only when a plan fetches from it (a converged host fetches nothing).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from gpunode.changes import Change, Fetch, Packages
from gpunode.inventory.model import Host

Manifest = Callable[[str], "dict[str, str] | None"]
"""A folder's URL -> the files its gpunode mirror manifest lists; None: no manifest."""


def unmirrored(host: Host, changes: Sequence[Change], manifest: Manifest) -> str | None:
    """The first file a change fetches from a gpunode mirror that the mirror does not hold
    (or holds with another sha256 than the step pins); None when none is missing."""
    for change in changes:
        for fetch in (f for s in change.steps for f in s.fetches):
            folder, _, name = fetch.url.rpartition("/")
            held = manifest(folder + "/")
            if held is not None and held.get(name) != fetch.sha256:
                what = "does not hold" if name not in held else "holds another sha256 of"
                return (
                    f"{change.title}: the mirror {folder}/ {what} {name}"
                    f" ({pinned_by(host, fetch)}): run `gpunode mirror` for this inventory"
                    " again"
                )
        for takes in change.packages:
            check = _unmirrored_wheels if takes.tool == "pip" else _unmirrored_conda
            if why := check(change.title, takes, manifest):
                return why
    return None


def pinned_by(host: Host, fetch: Fetch) -> str:
    """Where a fetched file's sha256 is set, for messages."""
    if fetch.url == host.repos.conda_installer:
        return "repos.conda_installer_sha256"
    return "its task's installer_sha256"


def _unmirrored_conda(title: str, takes: Packages, manifest: Manifest) -> str | None:
    """A pinned spec of a conda install (python=3.11) that no channel given by URL holds,
    when those channels are a gpunode mirror's."""
    urls = [c.rstrip("/") for c in takes.channels if "://" in c]
    held = [
        got for u in urls for sub in ("linux-64", "noarch")
        if (got := manifest(f"{u}/{sub}/")) is not None
    ]  # fmt: skip
    if not held:
        return None
    files = [f.removesuffix(".tar.bz2").removesuffix(".conda") for h in held for f in h]
    records = [tuple(f.rsplit("-", 2)) for f in files if f.count("-") >= 2]
    for spec in takes.specs:
        pin = _CONDA_PIN.fullmatch(spec)  # a range (numpy >=1.26) is the solver's to meet
        if pin is None:
            continue
        name, version = pin[1], pin[2]
        if not any(
            n == name and (v == version or v.startswith(version + ".")) for n, v, _ in records
        ):
            return (
                f"{title}: the mirror's channels {', '.join(urls)} hold no {name} {version}"
                f"{_of(takes)}: run `gpunode mirror` for this inventory again"
            )
    return None


def _unmirrored_wheels(title: str, takes: Packages, manifest: Manifest) -> str | None:
    if takes.index_url is None:
        return None  # pip's default index: not a gpunode mirror
    held = manifest(takes.index_url.rstrip("/") + "/")
    if held is None:
        return None
    if takes.unmirrorable:
        return f"{title}: {takes.unmirrorable}: a mirror cannot serve it"
    have = {_wheel(f) for f in held}
    for spec in takes.specs:
        m = _SPEC.fullmatch(spec)  # name==version; a range or a marker is pip's to meet
        if m and (pep503_name(m[1]), _release(m[2])) not in have:
            return (
                f"{title}: the mirror's index {takes.index_shown} holds no wheel of {m[1]}"
                f" {m[2]}{_of(takes)}: run `gpunode mirror` for this inventory again"
            )
    return None


def _of(takes: Packages) -> str:
    return f" ({takes.origin})" if takes.origin and takes.origin != takes.index_shown else ""


# name=version[=build], name==version, `name ==version`, `name version [build]`
_CONDA_PIN = re.compile(
    r"([A-Za-z0-9_][A-Za-z0-9_.-]*)(?: ?==?|\s+)([0-9][A-Za-z0-9_.+]*)(?:[=\s]\S*)?"
)
_SPEC = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[A-Za-z0-9._,-]+\])?\s*==\s*([0-9][^\s*;]*)")


def pep503_name(name: str) -> str:
    """A project's name as PEP 503 normalizes it (pip's index folders, wheels' names)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(version: str) -> str:
    """A version without its local label and trailing zeros: `==2.17` takes 2.17.0+cpu."""
    parts = version.split("+", 1)[0].split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return ".".join(parts)


def _wheel(filename: str) -> tuple[str, str]:
    """(project, release) of a wheel's file name: torch-2.4.1+cu124-py3-none-any.whl."""
    name, _, rest = filename.partition("-")
    return pep503_name(name), _release(rest.split("-", 1)[0])
