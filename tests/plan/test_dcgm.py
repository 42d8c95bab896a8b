"""stack.dcgm planned on a host from its facts alone: NVIDIA's DCGM 4, the package for the
default toolkit's CUDA major and its core at one exact version, both held, and the
nvidia-dcgm service once the driver's module is loaded."""

from __future__ import annotations

import pytest

from gpunode.changes import HostPlan
from gpunode.facts.model import HostFacts, KernelModule, Package
from gpunode.inventory import Host
from gpunode.repoindex import FETCHED, FetchedIndex, parse_packages
from gpunode.resolve.index import IndexCatalog
from gpunode.resolve.packages import Catalog
from tests.plan.planhelpers import FIX, REPO_URL, STACK, fresh_facts, host_from, plan_host

CORE = "datacenter-gpu-manager-4-core"


def dcgm_catalog() -> Catalog:
    extra = "".join(
        ln for ln in (FIX / "Packages.dcgm").read_text().splitlines(True) if not ln.startswith("#")
    )
    index = parse_packages((FIX / "Packages").read_text() + "\n" + extra)
    return IndexCatalog(FetchedIndex(REPO_URL, REPO_URL + "Packages", index, FETCHED, 0.0))


def dcgm_host(cuda: str, dcgm: str = "{}") -> Host:
    text = (
        STACK.replace('branch: "550"', 'branch: "580"')
        .replace('toolkits: ["12.4"], default: "12.4"', f'toolkits: ["{cuda}"], default: "{cuda}"')
        .replace('    cudnn: "9"\n', "")
        .replace('    nccl: "2.21"\n', "")
        .replace("    cuda_env: true\n", f"    cuda_env: true\n    dcgm: {dcgm}\n")
    )
    return host_from(text)


def dcgm_steps(plan: HostPlan) -> list[str]:
    assert plan.refused is None, plan.refused
    return [s.command for c in plan.changes if "dcgm" in c.roles for s in c.steps]


def targets(plan: HostPlan) -> list[str]:
    command = next(c for c in dcgm_steps(plan) if " install " in c)
    return [t.strip("'") for t in command.split(" -- ", 1)[1].split()]


@pytest.mark.parametrize("cuda", ["12.8", "13.0"])
def test_the_package_for_the_toolkits_cuda_major_and_its_core(cuda: str) -> None:
    plan = plan_host(dcgm_host(cuda), fresh_facts(), catalog=dcgm_catalog)
    major = cuda.split(".")[0]
    want = [f"datacenter-gpu-manager-4-cuda{major}=1:4.5.2-1", f"{CORE}=1:4.5.2-1"]
    assert all(t in targets(plan) for t in want), targets(plan)
    hold = next(c for c in dcgm_steps(plan) if c.startswith("apt-mark hold -- "))
    assert sorted(hold.removeprefix("apt-mark hold -- ").split()) == sorted(
        [CORE, f"datacenter-gpu-manager-4-cuda{major}"]
    )
    assert "dcgm: 1:4.5.2-1, the newest 4 in " in "\n".join(plan.notes)
    # no module loaded yet: the host engine is started after the reboot, by the re-plan
    assert not any("nvidia-dcgm" in c for c in dcgm_steps(plan))


def test_the_service_is_enabled_and_started_beside_a_loaded_module() -> None:
    facts = fresh_facts(module=KernelModule(loaded=True, version="580.95.05", flavor="open"))
    probes = {"systemd": True}
    plan = plan_host(dcgm_host("13.0"), facts, catalog=dcgm_catalog, probes=probes)
    steps = dcgm_steps(plan)
    assert "systemctl enable nvidia-dcgm" in steps and "systemctl start nvidia-dcgm" in steps


def installed(facts: HostFacts, version: str) -> HostFacts:
    pk = dict(facts.packages)
    for n in (CORE, "datacenter-gpu-manager-4-cuda13"):
        pk[n] = Package(name=n, version=version, status="hold ok installed")
    holds = sorted({*facts.gpunode_holds, CORE, "datacenter-gpu-manager-4-cuda13"})
    return facts.model_copy(update={"packages": pk, "gpunode_holds": holds})


def test_an_installed_release_is_kept_and_update_latest_moves_it() -> None:
    facts = installed(fresh_facts(), "1:4.5.1-1")
    kept = plan_host(dcgm_host("13.0"), facts, catalog=dcgm_catalog)
    assert "dcgm: 1:4.5.1-1, installed" in kept.notes
    assert not any(" install " in c for c in dcgm_steps(kept))
    moved = plan_host(dcgm_host("13.0", "{update: latest}"), facts, catalog=dcgm_catalog)
    assert "datacenter-gpu-manager-4-cuda13=1:4.5.2-1" in targets(moved)
    assert any("upgrade from 1:4.5.1-1" in n for n in moved.notes)


def test_a_release_the_index_lacks_is_refused_naming_what_it_has() -> None:
    plan = plan_host(dcgm_host("13.0", '"4.9"'), fresh_facts(), catalog=dcgm_catalog)
    assert plan.refused is not None
    assert plan.refused.startswith("stack.dcgm: DCGM 4.9 for CUDA 13.0 is not in ")
    assert plan.refused.endswith('it has 1:4.5.1-1, 1:4.5.2-1. Use dcgm: "4.5"')
