"""A gpunode mirror's completeness for what a plan fetches outside apt: the Miniconda
installer, the packages its pip installs name and the Python an env's `conda create` asks
for from a channel given by URL.

`gpunode mirror` writes a `gpunode-mirror.json` ({"files": {name: sha256}}) into each folder
it fills (miniconda/, simple/, pytorch/cu124/, a channel's linux-64/ and noarch/); a folder
without one (Anaconda's, PyPI, PyTorch's own index) is not checked. One small request per
folder and plan, only when a plan fetches from it (a converged host fetches nothing).
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Callable, Sequence

from gpunode.changes import Change
from gpunode.inventory.model import Host

Manifest = Callable[[str], "dict[str, str] | None"]
"""A folder's URL -> the files its gpunode mirror manifest lists; None: no manifest."""


def unmirrored(host: Host, changes: Sequence[Change], manifest: Manifest) -> str | None:
    """The first file a change fetches from a gpunode mirror that the mirror does not hold
    (or holds with another sha256 than the inventory pins); None when none is missing."""
    installer = host.repos.conda_installer
    folder, _, name = installer.rpartition("/")
    for change in changes:
        if any(installer in s.command for s in change.steps):
            held = manifest(folder + "/")
            if held is not None and held.get(name) != host.repos.conda_installer_sha256:
                what = "does not hold" if name not in held else "holds another sha256 of"
                return (
                    f"{change.title}: the mirror {folder}/ {what} {name}"
                    " (repos.conda_installer_sha256): run `gpunode mirror` for this inventory"
                    " again"
                )
        if change.op == "pip":
            why = _unmirrored_wheels(change, manifest)
            if why:
                return why
        if change.op == "conda_env" and (why := _unmirrored_conda(change, manifest)):
            return why
    return None


def _unmirrored_conda(change: Change, manifest: Manifest) -> str | None:
    """A spec of a `conda create` (python=3.11) that no channel given by URL holds, when
    those channels are a gpunode mirror's."""
    for step in change.steps:
        words = shlex.split(step.command)
        urls = [b.rstrip("/") for a, b in itertools.pairwise(words) if a == "-c" and "://" in b]
        held = [
            got for u in urls for sub in ("linux-64", "noarch")
            if (got := manifest(f"{u}/{sub}/")) is not None
        ]  # fmt: skip
        if not held:
            continue
        files = [f.removesuffix(".tar.bz2").removesuffix(".conda") for h in held for f in h]
        records = [tuple(f.rsplit("-", 2)) for f in files if f.count("-") >= 2]
        for spec in words:
            name, eq, version = spec.partition("=")
            if not eq or spec.startswith("-") or "/" in spec:
                continue
            if not any(
                n == name and (v == version or v.startswith(version + ".")) for n, v, _ in records
            ):
                return (
                    f"{change.title}: the mirror's channels {', '.join(urls)} hold no {name}"
                    f" {version}: run `gpunode mirror` for this inventory again"
                )
    return None


def _unmirrored_wheels(change: Change, manifest: Manifest) -> str | None:
    for step in change.steps:
        words = shlex.split(step.command)
        index = next((b for a, b in itertools.pairwise(words) if a == "--index-url"), None)
        if index is None:
            continue  # pip's default index: not a gpunode mirror
        held = manifest(index.rstrip("/") + "/")
        if held is None:
            continue
        have = {_wheel(f) for f in held}
        for spec in words:
            m = _SPEC.fullmatch(spec)
            if m and (pep503_name(m[1]), _release(m[2])) not in have:
                return (
                    f"{change.title}: the mirror's index {index} holds no wheel of {m[1]}"
                    f" {m[2]}: run `gpunode mirror` for this inventory again"
                )
    return None


_SPEC = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[A-Za-z0-9._,-]+\])?==([0-9][^\s]*)")


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
