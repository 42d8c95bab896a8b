"""Which conda records an env's `conda create` takes: a conda solver's answer.

The solver is py-rattler's (the Rust conda library pixi uses), given the channels'
repodata.json files the mirror has already downloaded (no second network path), linux-64
and noarch, conda's defaults: strict channel priority (a name is taken from the first
channel that has it), the highest versions, `.conda` over `.tar.bz2`, pip added to
Python's depends (add_pip_as_python_dependency), and the virtual packages of the host the
env is for (`host_virtual`). Its answer is one consistent set, so the host's conda can
solve from the mirror's channel: the newest of each name, dependency after dependency,
can ask for two Pythons at once (the newest libfoo wants python <3.12 while the env asks
python=3.12).

py-rattler is the optional extra `gpunode[mirror]`, imported here only, when a mirror has
conda envs to fill. Without it `gpunode mirror` stops before downloading anything, saying
how to install it, rather than falling back on a guess the hosts' conda may not solve
from: an air-gapped site learns that only on the far side of the gap.
"""

from __future__ import annotations

import asyncio
import datetime
import re
from collections.abc import Sequence
from pathlib import Path

from gpunode.compat.driver import driver_cuda, wanted_release
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host
from gpunode.mirror.wheels import GLIBC

INSTALL = "pip install 'gpunode[mirror]'"
TIMEOUT = datetime.timedelta(minutes=5)  # conda-forge's python + torch solves in seconds
LINUX = "5.4"  # the kernel conda's __linux says when the facts have none (Ubuntu 20.04's)

Virtual = tuple[str, str, str]  # a virtual package: name, version, build
Repodata = tuple[str, str, Path]  # channel URL, subdir, its repodata.json


class SolverMissing(ValueError):
    """py-rattler is not installed."""


class Unsolvable(ValueError):
    """No set of the channels' records meets the env's specs; the message says which."""


def require() -> None:
    """SolverMissing, saying how to install it, when the solver is not importable."""
    try:
        import rattler  # noqa: F401
    except ImportError:
        raise SolverMissing(
            "the envs' conda packages are chosen by conda's solver from py-rattler, which is"
            f" not installed: {INSTALL} (in gpunode's own environment), then run again"
        ) from None


def host_virtual(
    repo_slug: str = "", kernel: str = "", cuda: str | None = None
) -> tuple[Virtual, ...]:
    """What conda on the host would detect: __glibc of its Ubuntu release (the oldest
    gpunode knows, 2.31, when the release is unknown), __linux of its kernel, __cuda of
    its driver when there is one, __unix, __archspec x86_64."""
    glibc = GLIBC.get(repo_slug, min(GLIBC.values())).replace("_", ".")
    release = re.match(r"\d+(\.\d+)*", kernel)
    out = [
        ("__unix", "0", "0"),
        ("__linux", release[0] if release else LINUX, "0"),
        ("__glibc", glibc, "0"),
        ("__archspec", "1", "x86_64"),
    ]
    return (*out, ("__cuda", cuda, "0")) if cuda else tuple(out)


def virtual_of(host: Host, facts: HostFacts) -> tuple[Virtual, ...]:
    """`host_virtual` of a host: __cuda from the CUDA its stack's driver runs (the one
    installed when the stack leaves the driver alone)."""
    driver = host.stack.driver
    cuda = driver_cuda(wanted_release(driver)) if driver else facts.smi.cuda_version
    return host_virtual(facts.os.repo_slug, facts.kernel, cuda)


def solve(
    env: str, specs: Sequence[str], repodata: Sequence[Repodata], virtual: Sequence[Virtual]
) -> set[tuple[str, str, str]]:
    """(channel URL, subdir, file name) of each record conda's solver takes for `specs`
    from `repodata` (first channel first); Unsolvable naming `env` and the spec."""
    require()
    import rattler
    from rattler.exceptions import InvalidMatchSpecError, SolverError

    urls = ", ".join(dict.fromkeys(url for url, _, _ in repodata)) or "(no channel)"
    channels = {url: rattler.Channel(url) for url, _, _ in repodata}
    by_base = {ch.base_url: url for url, ch in channels.items()}
    sparse = [rattler.SparseRepoData(channels[url], sub, path) for url, sub, path in repodata]
    try:
        for spec in specs:
            try:
                match = rattler.MatchSpec(spec)
            except InvalidMatchSpecError as e:
                raise Unsolvable(f"{env}: {spec!r} is not a conda match spec: {e}") from None
            name = match.name.as_package_name()  # None: a glob, the solver's to meet
            if name is None or name.normalized.startswith("__"):
                continue  # a virtual package: the host's, not a file
            if any(r.matches(match) for s in sparse for r in s.load_records(name)):
                continue
            raise Unsolvable(
                f"{env}: no record in {urls} (linux-64, noarch) matches {spec}: correct the"
                " spec, or add a channel that has it"
            )
        hosts = [
            rattler.GenericVirtualPackage(
                rattler.PackageName(n), rattler.Version(v), rattler.BuildString(b)
            )
            for n, v, b in virtual
        ]
        solved = asyncio.run(
            rattler.solve_with_sparse_repodata(
                list(specs),
                sparse,
                virtual_packages=hosts,
                timeout=TIMEOUT,
                channel_priority=rattler.ChannelPriority.Strict,
                add_pip_as_python_dependency=True,
            )
        )
    except SolverError as e:
        shown = ", ".join(f"{n}={v}" for n, v, _ in virtual)
        raise Unsolvable(
            f"{env}: conda's solver finds no set of packages from {urls} for"
            f" {' '.join(specs)} on a host with {shown}: {e}"
        ) from None
    finally:
        for s in sparse:
            s.close()
    return {(by_base[r.channel], r.subdir, r.file_name) for r in solved}
