"""The driver branch's route from the inventory to the apt command, as docs/architecture.md
draws it: the branch is read where the inventory defines it, where compat/driver.py says
what it means, where resolve picks its release and where it is shown, and nowhere else; the
driver role reads what resolve made of it (`DriverPin`: the packages at the release), never
the branch, and names no package itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gpunode.compat import driver_names
from gpunode.compat.driver import offered_branches, release_of, releases
from gpunode.facts.model import HostFacts, Kernels
from gpunode.inventory.model import Driver
from gpunode.resolve.resolver import driver_pin

REPO = Path(__file__).resolve().parent.parent

READS_THE_BRANCH = {
    "gpunode/inventory/model.py": "defines it (a pinned version names its branch)",
    "gpunode/compat/driver.py": "says what it means: names, the CUDA it runs, refusals",
    "gpunode/compat/check.py": "the frameworks' wheels it can run, before touching a host",
    "gpunode/resolve/resolver.py": "its newest release in the repository, and the notes",
    "gpunode/cli/hosts.py": "shows it",
    "gpunode/cli/upgrade.py": "names it as the rollout's target, in the drain reason",
}


def _branch_reads(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == "branch" and isinstance(n.ctx, ast.Load)
    ]


def test_the_branch_is_read_only_where_the_route_says() -> None:
    found = {
        str(p.relative_to(REPO)): lines
        for p in sorted((REPO / "gpunode").rglob("*.py"))
        if (lines := _branch_reads(p))
    }
    stray = [f"{f}:{lines[0]}" for f, lines in found.items() if f not in READS_THE_BRANCH]
    assert not stray, (
        f"{', '.join(stray)} read(s) the driver branch: ask gpunode.compat.driver "
        "(driver_names, driver_satisfies...) instead, or add the file to the route in "
        "docs/architecture.md and here"
    )
    assert set(found) == set(READS_THE_BRANCH), "a file of the route no longer reads it"


def test_the_driver_role_reads_the_pin_not_the_branch() -> None:
    role = REPO / "roles" / "driver"
    reads = 0
    for path in sorted(role.rglob("*")):
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            assert "stack.driver.branch" not in code, f"{path}:{n}: reads the branch"
            assert "compat." not in code, f"{path}:{n}: asks compat: the DriverPin has it"
            assert "| pin" not in code, f"{path}:{n}: pins a name: DriverPin.packages are"
            reads += "resolved.driver" in code
    assert reads == 1, "the role reads resolve's DriverPin once, in defaults.yaml"


def test_route_is_documented_file_by_file() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text()
    section = doc.split("## Following the driver branch", 1)[1].split("\n## ", 1)[0]
    route = (*READS_THE_BRANCH, "roles/driver/defaults.yaml", "gpunode/roles/ops/apt.py")
    for path in route:
        assert path.removeprefix("gpunode/") in section, path


def test_one_object_names_every_package_of_a_branch() -> None:
    nvidia = driver_names(Driver(branch="580", flavor="open", hold=True))
    assert nvidia.install == ("nvidia-open-580", "libnvidia-compute-580")
    assert (nvidia.release, nvidia.fabricmanager) == ("nvidia-open-580", "nvidia-fabricmanager-580")
    assert re.fullmatch(nvidia.held, "nvidia-driver-pinning-590")
    assert not re.fullmatch(nvidia.held, "nvidia-fabricmanager-580")
    assert re.fullmatch(nvidia.fabricmanager_held, "nvidia-fabricmanager-580")
    assert nvidia.modules(["6.8.0-45-generic"], {}) == []

    ubuntu = driver_names(Driver(source="ubuntu", branch="570", server=True, headless=True))
    assert ubuntu.install == (
        "nvidia-headless-no-dkms-570-server-open",
        "nvidia-utils-570-server",
        "nvidia-compute-utils-570-server",
    )
    assert ubuntu.release == ubuntu.userspace == "nvidia-utils-570-server"
    # signed modules for each kernel the archive has them for, the next boot's always
    running, nxt = "6.8.0-45-generic", "6.8.0-51-generic"
    offered = {f"linux-modules-nvidia-570-server-open-{running}": ["570.172.08-0ubuntu0.24.04.1"]}
    assert ubuntu.modules([running, nxt], offered) == [
        f"linux-modules-nvidia-570-server-open-{running}",
        f"linux-modules-nvidia-570-server-open-{nxt}",
    ]
    assert ubuntu.modules(["6.8.0-40-generic", nxt], offered) == [
        f"linux-modules-nvidia-570-server-open-{nxt}"
    ]


def test_the_pin_holds_every_package_at_the_release() -> None:
    running, nxt = "6.8.0-45-generic", "6.8.0-51-generic"
    facts = HostFacts(kernel=running, kernels=Kernels(installed=[running, nxt], next_boot=nxt))
    nvidia = driver_pin(Driver(branch="580", flavor="open"), "580.95.05", facts)
    assert nvidia.packages == ("nvidia-open-580=580.95.05-*", "libnvidia-compute-580=580.95.05-*")
    assert nvidia.fabricmanager == "nvidia-fabricmanager-580=580.95.05-*"

    # Ubuntu's signed modules carry the kernel's version: unpinned, ahead of the user space
    modules = f"linux-modules-nvidia-570-open-{nxt}"
    facts.apt_versions = {modules: ["6.8.0-51.52+1"], "nvidia-utils-570": ["570.172.08-0ubuntu1"]}
    ubuntu = driver_pin(Driver(source="ubuntu", branch="570", headless=True), "570.172.08", facts)
    assert ubuntu.packages[0] == modules
    assert ubuntu.packages[1:] == tuple(f"{n}=570.172.08-*" for n in ubuntu.names.install)


# Versions as NVIDIA's repository publishes them (several releases per branch, a release
# rebuilt as -0ubuntu1 and -1, 590 on unversioned) and as Ubuntu's archive does (an SRU's
# -0ubuntu0.24.04.N, an epoch)
OFFERED = [
    "570.195.03-0ubuntu1",
    "580.105.08-0ubuntu1",
    "580.65.06-0ubuntu1",
    "580.95.05-0ubuntu1",
    "580.95.05-1",
    "1:580.82.07-0ubuntu0.24.04.2",
    "590.44.01-1",
]


def test_which_versions_are_the_branchs_releases_is_compats_to_say() -> None:
    d = Driver(branch="580")
    assert releases(d, OFFERED) == ["580.65.06", "580.82.07", "580.95.05", "580.105.08"]
    assert release_of(d, "1:580.82.07-0ubuntu0.24.04.2") == "580.82.07"
    assert release_of(d, "570.195.03-0ubuntu1") is None
    assert release_of(Driver(branch="580"), "5800.1-1") is None
    assert offered_branches(OFFERED) == ["570", "580", "590"]
    assert releases(Driver(branch="550"), OFFERED) == []


def test_resolve_asks_compat_which_versions_are_the_branchs() -> None:
    """The resolver's driver functions use no version helper of their own (resolve/specs.py,
    versions.py) on the branch's packages: which versions are its releases, and their
    order, is gpunode.compat.driver's to say."""
    path = REPO / "gpunode" / "resolve" / "resolver.py"
    tree = ast.parse(path.read_text(), str(path))
    helpers = {
        a.asname or a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom)
        and n.module in ("gpunode.resolve.specs", "gpunode.versions")
        for a in n.names
    }
    assert helpers, "resolver.py imports no version helper: the test reads nothing"
    driver_functions = [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
        and n.name in ("_driver", "driver_pin", "installed_driver")
    ]
    assert len(driver_functions) == 3
    used = [
        f"resolver.py:{n.lineno} {n.id}"
        for f in driver_functions
        for n in ast.walk(f)
        if isinstance(n, ast.Name) and n.id in helpers
    ]
    assert not used, f"{used}: ask gpunode.compat.driver (releases, release_of)"
