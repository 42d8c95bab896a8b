"""Specs resolved against the repository's index and the host's dpkg state: installed
versions that satisfy a spec are kept, anything else is the newest the index offers, and
what cannot be had is refused at plan time naming what the repository has."""

from __future__ import annotations

from gpunode.changes import HostPlan
from gpunode.facts.model import HostFacts, KernelModule, NvidiaSmi, Package
from gpunode.resolve.packages import Catalog
from tests.plan.planhelpers import STACK, catalog, fresh_facts, host_from, plan_host

NO_SYSTEMD = {"systemd": False}


def stack(**swap: str) -> str:
    text = STACK
    for old, new in swap.items():
        text = text.replace(old, new)
    return text


def with_packages(facts: HostFacts, **versions: str) -> HostFacts:
    """Held by gpunode (recorded in its holds file), as a host it converged."""
    pk = dict(facts.packages)
    for name, version in versions.items():
        pk[name.replace("_", "-")] = Package(
            name=name.replace("_", "-"), version=version, status="hold ok installed"
        )
    ours = sorted({*facts.gpunode_holds, *(n.replace("_", "-") for n in versions)})
    return facts.model_copy(update={"packages": pk, "gpunode_holds": ours})


def driver_550(release: str) -> HostFacts:
    v = f"{release}-0ubuntu1"
    facts = with_packages(fresh_facts(), nvidia_open_550=v, libnvidia_compute_550=v)
    return facts.model_copy(
        update={
            "module": KernelModule(loaded=True, version=release, flavor="open"),
            "smi": NvidiaSmi(ok=True, driver_version=release),
        }
    )


def untouched() -> Catalog:
    raise AssertionError("the index was read although nothing needed it")


def install_args(plan: HostPlan) -> list[str]:
    return [
        t
        for c in plan.changes
        for s in c.steps
        if " install " in s.command
        for t in s.command.split(" install ", 1)[1].split()
    ]


def test_an_installed_release_of_the_branch_is_kept_without_reading_the_index() -> None:
    host = host_from(stack(**{'    cudnn: "9"\n': "", '    nccl: "2.21"\n': ""}))
    facts = with_packages(driver_550("550.127.05"), cuda_toolkit_12_4="12.4.1-1")
    plan = plan_host(host, facts, probes=NO_SYSTEMD, catalog=untouched)
    assert plan.refused is None
    assert not any("driver" in c.roles and c.op == "apt_packages" for c in plan.changes)
    assert not plan.needs_reboot
    assert "driver: 550.127.05, installed, a release of branch 550" in plan.notes


def test_a_pinned_release_upgrades_and_reboots_once() -> None:
    host = host_from(stack(**{'branch: "550"': 'version: "550.163.01"'}))
    plan = plan_host(host, driver_550("550.127.05"), probes=NO_SYSTEMD)
    assert "'nvidia-open-550=550.163.01-*'" in install_args(plan)
    assert [c.reason for c in plan.changes if c.reboot] == [
        "driver 550.127.05 (open) loaded, 550.163.01 (open) wanted: reboot needed"
    ]


def test_update_latest_moves_the_installed_release_to_the_newest_of_its_branch() -> None:
    host = host_from(stack(**{'branch: "550"': 'branch: "550", update: latest'}))
    plan = plan_host(host, driver_550("550.54.15"), probes=NO_SYSTEMD)
    assert "'nvidia-open-550=550.163.01-*'" in install_args(plan)
    assert plan.needs_reboot


def test_a_fresh_host_gets_the_newest_release_the_repository_has() -> None:
    plan = plan_host(host_from(STACK), fresh_facts(), probes=NO_SYSTEMD)
    assert "'nvidia-open-550=550.163.01-*'" in install_args(plan)
    assert any(n.startswith("driver: 550.163.01, the newest 550 in http://") for n in plan.notes)
    assert any(n.startswith("versions from http://127.0.0.1:8080/") for n in plan.notes)


def test_a_pin_the_repository_lacks_is_refused_with_what_it_has() -> None:
    host = host_from(stack(**{'branch: "550"': 'version: "550.99.01"'}))
    plan = plan_host(host, fresh_facts(), probes=NO_SYSTEMD)
    assert plan.refused == (
        "stack.driver.version: nvidia-open-550 550.99.01 is not in "
        "http://127.0.0.1:8080/cuda/repos/ubuntu2204/x86_64/: "
        "it has 550.54.15, 550.127.05, 550.163.01"
    )
    assert plan.changes == ()


def test_cudnn_series_newer_installed_is_a_downgrade_not_a_match() -> None:
    host = host_from(stack(**{'cudnn: "9"': 'cudnn: "9.10"'}))
    facts = with_packages(fresh_facts(), libcudnn9_cuda_12="9.14.0.64-1")
    plan = plan_host(host, facts, probes=NO_SYSTEMD)
    assert "libcudnn9-cuda-12=9.10.2.21-1" in install_args(plan)
    assert any("cudnn: 9.10.2.21-1" in n and "downgrade from 9.14.0.64-1" in n for n in plan.notes)
    # "9" is satisfied by the 9.14 installed: kept
    plan = plan_host(host_from(STACK), facts, probes=NO_SYSTEMD)
    assert "cudnn: 9.14.0.64-1, installed" in plan.notes
    assert not any(a.startswith("libcudnn9-cuda-12=") for a in install_args(plan))


def test_cudnn_series_the_repository_lacks_is_refused_with_advice() -> None:
    host = host_from(stack(**{'cudnn: "9"': 'cudnn: "9.12"'}))
    plan = plan_host(host, fresh_facts(), probes=NO_SYSTEMD)
    assert plan.refused == (
        "stack.cudnn: cuDNN 9.12 for CUDA 12.4 is not in "
        "http://127.0.0.1:8080/cuda/repos/ubuntu2204/x86_64/: it has 9.8.0.87-1, "
        '9.10.2.21-1, 9.14.0.64-1. Use cudnn: "9" or "9.14"'
    )


def test_nccl_series_picks_the_newest_build_that_fits_the_toolkit() -> None:
    for toolkit, want in (("12.8", "2.26.2-1+cuda12.8"), ("12.9", "2.26.5-1+cuda12.9"),
                          ("12.4", "2.26.2-1+cuda12.4")):  # fmt: skip
        swap = {'"12.4"': f'"{toolkit}"', '"2.21"': '"2.26"', '"550"': '"580"'}
        host = host_from(stack(**swap))
        plan = plan_host(host, fresh_facts(), probes=NO_SYSTEMD)
        assert plan.refused is None, plan.refused
        assert f"libnccl2={want}" in install_args(plan), toolkit


def test_nccl_with_no_build_for_the_toolkit_is_refused_naming_the_fits() -> None:
    host = host_from(stack(**{'"12.4"': '"13.0"', '"2.21"': '"2.26"', '"550"': '"580"'}))
    plan = plan_host(host, fresh_facts("24.04"), probes=NO_SYSTEMD)
    assert plan.refused is not None
    assert plan.refused.startswith("stack.nccl: NCCL 2.26 for CUDA 13.0 is not in http://")
    assert plan.refused.endswith('it has 2.27.7-1+cuda13.0, 2.28.3-1+cuda13.0. Use nccl: "2.28"')


def test_a_missing_toolkit_the_repository_lacks_is_refused() -> None:
    swap = {'"12.4"': '"12.6"', '"550"': '"580"', '    cudnn: "9"\n': "", '    nccl: "2.21"\n': ""}
    host = host_from(stack(**swap))
    plan = plan_host(host, fresh_facts(), probes=NO_SYSTEMD)
    assert plan.refused is not None and plan.refused.startswith(
        "stack.cuda.toolkits: CUDA 12.6 (cuda-toolkit-12-6) is not in http://"
    )
    assert plan.refused.endswith("it has 12.4, 12.8, 12.9, 13.0, 13.1")


def test_an_unmanaged_repository_is_named_instead_of_an_install_from_nowhere() -> None:
    host = host_from(stack(**{"nvidia: http://127.0.0.1:8080/cuda/repos": "nvidia: null"}))
    plan = plan_host(host, fresh_facts(), probes=NO_SYSTEMD)
    assert plan.refused is not None
    assert "the NVIDIA repository is not managed here (repos.nvidia: null)" in plan.refused


def test_the_index_is_read_at_most_once_per_host_plan() -> None:
    calls = []

    def counted() -> Catalog:
        calls.append(1)
        return catalog()

    plan_host(host_from(STACK), fresh_facts(), probes=NO_SYSTEMD, catalog=counted)
    assert calls == [1]
