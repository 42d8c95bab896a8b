"""What apt will be asked for is checked against the index at plan time: against the lab's
repository, which gpunode_lab builds from its own data in NVIDIA's layout (the pinning
package of 590 versioned by branch, metapackages that depend on every part at exactly
their release), not from anything gpunode says."""

from __future__ import annotations

from functools import cache

import pytest
from test_resolution import driver_550, stack, with_packages

from gpunode.changes import Change, Step
from gpunode.facts.model import HostFacts, KernelModule, NvidiaSmi
from gpunode.inventory.model import Host
from gpunode.plan.aptcheck import unavailable
from gpunode.repoindex import FETCHED, FetchedIndex
from gpunode.repoindex.packages import parse_packages
from gpunode.resolve.index import IndexCatalog
from gpunode.resolve.packages import Catalog
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host

gpunode_lab = pytest.importorskip("gpunode_lab")
from gpunode_lab.repo import catalog as lab_catalog  # noqa: E402
from gpunode_lab.repo.deb import control_text  # noqa: E402

NO_SYSTEMD = {"systemd": False}
URL = "http://127.0.0.1:8080/cuda/repos/ubuntu2404/x86_64/"


@cache
def lab_index(mirror: str, distro: str = "ubuntu2404") -> Catalog:
    """The Packages index the lab serves for an Ubuntu release from this kind of mirror."""
    text = "\n".join(control_text(p.control_fields()) for p in lab_catalog.packages_for(
        distro, mirror))  # fmt: skip
    index = parse_packages(text)
    return IndexCatalog(FetchedIndex(URL, URL + "Packages", index, FETCHED, 0.0))


def host_590() -> Host:
    return host_from(
        stack(**{'branch: "550"': 'branch: "590"', '"12.4"': '"13.1"', '    nccl: "2.21"\n': ""})
    )


def driver_570(release: str) -> HostFacts:
    v = f"{release}-0ubuntu1"
    names = ("nvidia-open-570", "nvidia-driver-570-open", "nvidia-dkms-570-open",
             "libnvidia-compute-570")  # fmt: skip
    facts = with_packages(fresh_facts("24.04"), **{n.replace("-", "_"): v for n in names})
    return facts.model_copy(
        update={
            "module": KernelModule(loaded=True, version=release, flavor="open"),
            "smi": NvidiaSmi(ok=True, driver_version=release),
        }
    )


def stack_570_latest() -> str:
    return stack(
        **{
            'branch: "550", flavor: open': 'branch: "570", flavor: open, update: latest',
            '"12.4"': '"12.8"',
            '    cudnn: "9"\n': "",
            '    nccl: "2.21"\n': "",
        }
    )


def test_590_plans_what_the_repository_publishes() -> None:
    """From 590 on, nvidia-driver-pinning-<branch> is versioned by branch ("590-1"), not by
    release: it is installed as it is, the unversioned driver packages at the release."""
    plan = plan_host(host_590(), fresh_facts("24.04"), probes=NO_SYSTEMD,
                     catalog=lambda: lab_index("full"))  # fmt: skip
    assert plan.refused is None, plan.refused
    installs = [t for c in plan.changes for s in c.steps for t in s.installs]
    assert "nvidia-driver-pinning-590" in installs
    assert "'nvidia-open=590.44.01-*'" in installs


def test_a_version_the_index_lacks_is_refused_naming_what_it_has() -> None:
    """What the planner asked for before: the pinning package at the driver's release."""
    asked = ("'nvidia-driver-pinning-590=590.44.01-*'",)
    change = Change("driver", "NVIDIA driver", "apt_packages", "missing",
                    (Step("apt-get install", installs=asked),), apt=True)  # fmt: skip
    why = unavailable([change], [lab_index("full")], fresh_facts("24.04"))
    assert why is not None
    assert "nvidia-driver-pinning-590=590.44.01-*" in why
    assert "(it has 590-1)" in why


def test_a_mirror_caught_mid_sync_is_refused_at_plan_time() -> None:
    """The index lists nvidia-open-570 570.195.03 and its driver package, not the DKMS
    package the driver package depends on at exactly that release."""
    host = host_from(stack_570_latest())
    plan = plan_host(host, driver_570("570.133.20"), probes=NO_SYSTEMD,
                     catalog=lambda: lab_index("mid-sync"))  # fmt: skip
    assert plan.refused is not None
    assert "nvidia-dkms-570-open (= 570.195.03-0ubuntu1)" in plan.refused
    assert "it has 570.133.20-0ubuntu1" in plan.refused
    assert not plan.changes


def test_the_same_upgrade_from_a_full_mirror_is_accepted() -> None:
    host = host_from(stack_570_latest())
    plan = plan_host(host, driver_570("570.133.20"), probes=NO_SYSTEMD,
                     catalog=lambda: lab_index("full"))  # fmt: skip
    assert plan.refused is None, plan.refused
    installs = [t for c in plan.changes for s in c.steps for t in s.installs]
    assert "'nvidia-open-570=570.195.03-*'" in installs


def test_a_dependency_the_host_already_has_needs_no_index() -> None:
    """Mid-sync, but the host has the DKMS package at the wanted release already."""
    facts = driver_570("570.133.20")
    pk = dict(facts.packages)
    pk["nvidia-dkms-570-open"] = pk["nvidia-dkms-570-open"].model_copy(
        update={"version": "570.195.03-0ubuntu1"}
    )
    change = Change("driver", "NVIDIA driver", "apt_packages", "missing",
                    (Step("apt-get install", installs=("'nvidia-open-570=570.195.03-*'",)),),
                    apt=True)  # fmt: skip
    facts = facts.model_copy(update={"packages": pk})
    assert unavailable([change], [lab_index("mid-sync")], facts) is None


def test_a_converged_550_host_reads_no_index() -> None:
    def untouched() -> Catalog:
        raise AssertionError("the index was read although nothing needed it")

    host = host_from(STACK.replace('    cudnn: "9"\n', "").replace('    nccl: "2.21"\n', ""))
    facts = with_packages(driver_550("550.127.05"), cuda_toolkit_12_4="12.4.1-1")
    assert plan_host(host, facts, probes=NO_SYSTEMD, catalog=untouched).refused is None


def test_an_older_release_names_the_installed_dependency_apt_would_not_move() -> None:
    """cuDNN 9.14 installed, 9.10 wanted: libcudnn9-dev-cuda-12 9.10 depends on the headers
    at exactly 9.10, which apt leaves at 9.14 unless they are named."""
    host = host_from(stack(**{'cudnn: "9"': 'cudnn: "9.10"', '    nccl: "2.21"\n': ""}))
    v = "9.14.0.64-1"
    facts = with_packages(
        fresh_facts("22.04"),
        libcudnn9_cuda_12=v,
        libcudnn9_dev_cuda_12=v,
        libcudnn9_headers_cuda_12=v,
        cuda_toolkit_12_4="12.4.1-1",
    )
    plan = plan_host(
        host, facts, probes=NO_SYSTEMD, catalog=lambda: lab_index("full", "ubuntu2204")
    )
    assert plan.refused is None, plan.refused
    installs = [t for c in plan.changes for s in c.steps for t in s.installs]
    assert "libcudnn9-headers-cuda-12=9.10.2.21-1" in installs, installs
    assert "libcudnn9-dev-cuda-12=9.10.2.21-1" in installs
