"""The lab's declared stack, spelled out for the Ansible playbook and the pyinfra deploy.

Everything is derived from the inventory `gpunode lab inventory` prints, with the versions
gpunode resolves from the lab repository's index, so all three tools aim at one end state: the
same packages at the same versions, the same holds, the same files byte for byte.
Versions that gpunode pins by glob (the driver's "580.159.04-*") are resolved to the
exact version the lab repository holds, because pyinfra compares versions literally.
"""

from __future__ import annotations

import fnmatch
import hashlib
from pathlib import Path
from typing import Any

import jinja2

from gpunode import compat
from gpunode.facts.model import HostFacts, OsRelease
from gpunode.inventory.loader import load
from gpunode.inventory.model import Host
from gpunode.repoindex import FETCHED, FetchedIndex, parse_packages
from gpunode.resolve.index import IndexCatalog
from gpunode.resolve.resolver import Resolved
from gpunode.resolve.resolver import resolve as resolve_specs
from gpunode.versions import dotted_key

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
KEYRING_VERSION = "1.1-1"
CUDA_HOME = "/usr/local/cuda"
BLACKLIST_PATH = "/etc/modprobe.d/gpunode-blacklist-nouveau.conf"
BLACKLIST = "# managed by gpunode\nblacklist nouveau\noptions nouveau modeset=0\n"
ENV_PATH = "/etc/profile.d/gpunode-cuda.sh"
LDCONF_PATH = "/etc/ld.so.conf.d/gpunode-cuda.conf"


def repo_versions(packages_index: Path) -> dict[str, list[str]]:
    """Package name -> versions, from a repository's Packages file."""
    out: dict[str, list[str]] = {}
    name = ""
    for line in packages_index.read_text().splitlines():
        if line.startswith("Package: "):
            name = line.split(": ", 1)[1]
        elif line.startswith("Version: ") and name:
            out.setdefault(name, []).append(line.split(": ", 1)[1])
    return out


def resolve(name: str, pattern: str, versions: dict[str, list[str]]) -> str:
    found = [v for v in versions.get(name, []) if fnmatch.fnmatchcase(v, pattern)]
    if not found:
        raise ValueError(f"the lab repository has no {name} matching {pattern!r}")
    return max(found, key=dotted_key)


def _resolve(host: Host, packages: Path, ubuntu: str) -> Resolved:
    index = parse_packages(packages.read_text())
    url = f"file://{packages.parent}/"
    cat = IndexCatalog(FetchedIndex(url, url + "Packages", index, FETCHED, 0.0))
    facts = HostFacts(os=OsRelease(id="ubuntu", version_id=ubuntu))
    return resolve_specs(host, facts, lambda: cat)


def render(name: str, **values: str) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(name).render(**values)


def declared(inventory: Path, repo_dir: Path, ubuntu: str) -> dict[str, Any]:
    """The stack of the inventory's (first) host, as plain data for the other tools."""
    inv = load(inventory)
    host = next(iter(inv.hosts.values()))
    stack = host.stack
    if stack.driver is None or stack.cuda is None or not stack.cudnn or not stack.nccl:
        raise ValueError(f"{inventory}: the benchmark needs driver, cuda, cudnn and nccl set")
    slug = "ubuntu" + ubuntu.replace(".", "")
    cuda = stack.cuda.default_toolkit or stack.cuda.toolkits[-1]
    versions = repo_versions(repo_dir / slug / "x86_64" / "Packages")

    # The versions gpunode resolves for a fresh host from this repository's own index.
    resolved = _resolve(host, repo_dir / slug / "x86_64" / "Packages", ubuntu)
    if resolved.driver is None:
        raise ValueError(f"{inventory}: no driver release resolved")
    pin = resolved.driver
    driver = {n: resolve(n, f"{pin.release}-*", versions) for n in pin.names.install}
    cudnn, nccl = resolved.cudnn, resolved.nccl
    # a PackagePin names the runtime library first, then its headers
    if cudnn is None or nccl is None or len(cudnn.packages) < 2:
        raise ValueError(f"no cuDNN {stack.cudnn} / NCCL {stack.nccl} build for CUDA {cuda}")
    nccl_build = nccl.version
    cudnn_dev = cudnn.packages[1]
    if not host.repos.nvidia:
        raise ValueError(f"{inventory}: repos.nvidia is not set")
    repo_url = f"{host.repos.nvidia.rstrip('/')}/{slug}/x86_64"
    # held as gpunode's roles hold them: cuDNN's runtime library, not its headers
    held = {**driver, cudnn.name: cudnn.version, "libnccl2": nccl_build, "libnccl-dev": nccl_build}
    toolkits = [compat.toolkit_package(t) for t in stack.cuda.toolkits]
    files = {
        f"/etc/apt/sources.list.d/cuda-{slug}-x86_64.list": (
            f"deb [signed-by={KEYRING}] {repo_url}/ /\n"
        ),
        BLACKLIST_PATH: BLACKLIST,
        ENV_PATH: render("gpunode-cuda.sh.j2", cuda_home=CUDA_HOME),
        LDCONF_PATH: render("gpunode-cuda.conf.j2", cuda_home=CUDA_HOME),
    }
    return {
        "repo_url": repo_url,
        "keyring": KEYRING,
        "keyring_deb": f"{repo_url}/cuda-keyring_{KEYRING_VERSION}_all.deb",
        "keyring_version": KEYRING_VERSION,
        "sources_path": f"/etc/apt/sources.list.d/cuda-{slug}-x86_64.list",
        "sources_line": files[f"/etc/apt/sources.list.d/cuda-{slug}-x86_64.list"],
        "blacklist_path": BLACKLIST_PATH,
        "blacklist": BLACKLIST,
        "driver": [f"{n}={v}" for n, v in driver.items()],
        "toolkits": toolkits,
        "cudnn": [f"{cudnn.name}={cudnn.version}", f"{cudnn_dev}={cudnn.version}"],
        "nccl": [f"libnccl2={nccl_build}", f"libnccl-dev={nccl_build}"],
        "hold": sorted(held),
        "cuda_home": CUDA_HOME,
        "cuda_default": f"/usr/local/cuda-{cuda}",
        "cuda_priority": int(cuda.replace(".", "")),
        "env_path": ENV_PATH,
        "ldconf_path": LDCONF_PATH,
        "expect": {
            "packages": {**held, cudnn_dev: cudnn.version, **dict.fromkeys(toolkits, "")},
            "held": sorted(held),
            "files": {p: hashlib.sha256(c.encode()).hexdigest() for p, c in files.items()},
            "cuda_alternative": f"/usr/local/cuda-{cuda}",
        },
    }
