"""stack.tensorrt resolved against an index with several releases and several CUDA builds
per release: the build for the default toolkit's CUDA major is chosen, every package of the
set is installed at that one version, and what no build satisfies is refused naming what the
repository has."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.changes import Change, HostPlan
from gpunode.compat import check_host
from gpunode.facts.model import HostFacts, Package
from gpunode.inventory import Host, InventoryError, loads
from gpunode.repoindex import FETCHED, FetchedIndex, parse_packages
from gpunode.resolve.index import IndexCatalog
from gpunode.resolve.packages import Catalog
from tests.plan.planhelpers import FIX, REPO_URL, STACK, fresh_facts, host_from, plan_host

RUNTIME = [
    "libnvinfer10",
    "libnvinfer-plugin10",
    "libnvinfer-lean10",
    "libnvinfer-dispatch10",
    "libnvinfer-vc-plugin10",
    "libnvonnxparsers10",
]
PYTHON = ["python3-libnvinfer", "python3-libnvinfer-lean", "python3-libnvinfer-dispatch"]
DEV = [
    "libnvinfer-headers-dev",
    "libnvinfer-headers-plugin-dev",
    "libnvinfer-dev",
    "libnvinfer-plugin-dev",
    "libnvinfer-lean-dev",
    "libnvinfer-dispatch-dev",
    "libnvinfer-vc-plugin-dev",
    "libnvonnxparsers-dev",
    "libnvinfer-bin",
    "tensorrt-dev",
]


def trt_catalog() -> Catalog:
    extra = "".join(
        ln for ln in Path(FIX / "Packages.tensorrt").read_text().splitlines(True)
        if not ln.startswith("#")
    )  # fmt: skip
    index = parse_packages((FIX / "Packages").read_text() + "\n" + extra)
    return IndexCatalog(FetchedIndex(REPO_URL, REPO_URL + "Packages", index, FETCHED, 0.0))


def untouched() -> Catalog:
    raise AssertionError("the index was read although nothing needed it")


def trt_host(cuda: str, tensorrt: str = '"10"', driver: str = "580") -> Host:
    text = (
        STACK.replace('branch: "550"', f'branch: "{driver}"')
        .replace('toolkits: ["12.4"], default: "12.4"', f'toolkits: ["{cuda}"], default: "{cuda}"')
        .replace('    cudnn: "9"\n', "")
        .replace('    nccl: "2.21"\n', "")
        .replace("    cuda_env: true\n", f"    cuda_env: true\n    tensorrt: {tensorrt}\n")
    )
    return host_from(text)


def installed(facts: HostFacts, version: str, names: list[str]) -> HostFacts:
    pk = dict(facts.packages)
    for n in names:
        pk[n] = Package(name=n, version=version, status="hold ok installed")
    holds = sorted({*facts.gpunode_holds, *RUNTIME})
    return facts.model_copy(update={"packages": pk, "gpunode_holds": holds})


def trt_change(plan: HostPlan) -> Change:
    assert plan.refused is None, plan.refused
    found = [c for c in plan.changes if "tensorrt" in c.roles]
    assert len(found) == 1, [c.task for c in plan.changes]
    return found[0]


def install_targets(plan: HostPlan) -> list[str]:
    command = next(s.command for s in trt_change(plan).steps if " install " in s.command)
    return [t.strip("'") for t in command.split(" -- ", 1)[1].split()]


def held(plan: HostPlan) -> list[str]:
    c = trt_change(plan)
    cmd = next(s.command for s in c.steps if s.command.startswith("apt-mark hold -- "))
    return cmd.removeprefix("apt-mark hold -- ").split()


@pytest.mark.parametrize(
    ("cuda", "build"),
    [
        ("13.0", "10.14.1.48-1+cuda13.0"),  # the newest release, its CUDA 13 build
        ("12.9", "10.14.1.48-1+cuda12.9"),
        ("12.4", "10.14.1.48-1+cuda12.9"),  # only 12.9 for CUDA 12: the newest of the major
    ],
)
def test_the_build_for_the_toolkits_cuda_major_is_chosen(cuda: str, build: str) -> None:
    plan = plan_host(trt_host(cuda), fresh_facts(), catalog=trt_catalog)
    targets = install_targets(plan)
    wanted = [*RUNTIME, "tensorrt-libs", *DEV, *PYTHON]
    assert all(f"{n}={build}" in targets for n in wanted), targets
    assert f"tensorrt: {build}, the newest 10 in " in "\n".join(plan.notes)
    assert f"(built for CUDA {build.rsplit('+cuda', 1)[1]})" in "\n".join(plan.notes)
    assert sorted(held(plan)) == sorted(RUNTIME)


def test_of_two_builds_of_a_release_the_one_not_newer_than_the_toolkit() -> None:
    plan = plan_host(trt_host("12.8", '"10.10"'), fresh_facts(), catalog=trt_catalog)
    assert "libnvinfer10=10.10.0.31-1+cuda12.8" in install_targets(plan)
    plan = plan_host(trt_host("12.9", '"10.10"'), fresh_facts(), catalog=trt_catalog)
    assert "libnvinfer10=10.10.0.31-1+cuda12.9" in install_targets(plan)


def test_a_series_and_an_exact_build_pin_their_release() -> None:
    plan = plan_host(trt_host("13.0", '"10.13"'), fresh_facts(), catalog=trt_catalog)
    assert "tensorrt-dev=10.13.3.9-1+cuda13.0" in install_targets(plan)
    exact = '{version: "10.13.3.9-1+cuda12.9"}'
    plan = plan_host(trt_host("12.9", exact), fresh_facts(), catalog=trt_catalog)
    assert "python3-libnvinfer=10.13.3.9-1+cuda12.9" in install_targets(plan)
    assert any("pinned, in " in n for n in plan.notes)


def test_python_and_dev_false_install_the_runtime_alone_unheld_with_hold_false() -> None:
    host = trt_host("13.0", '{version: "10", python: false, dev: false, hold: false}')
    plan = plan_host(host, fresh_facts(), catalog=trt_catalog)
    names = sorted(
        t.split("=")[0]
        for t in install_targets(plan)
        if "nvinfer" in t or "tensorrt" in t or "onnx" in t
    )
    assert names == sorted([*RUNTIME, "tensorrt-libs"])
    assert not any(s.command.startswith("apt-mark hold") for s in trt_change(plan).steps)


def test_an_installed_version_satisfying_the_spec_is_kept_without_the_index() -> None:
    v = "10.13.3.9-1+cuda13.0"
    facts = installed(fresh_facts(), v, [*RUNTIME, "tensorrt-libs", *DEV, *PYTHON])
    facts = installed(facts, "13.0.2-1", ["cuda-toolkit-13-0"])
    facts = facts.model_copy(update={"gpunode_holds": sorted({*facts.gpunode_holds, *RUNTIME})})
    host = trt_host("13.0", '"10"')
    host = host.model_copy(update={"stack": host.stack.model_copy(update={"driver": None})})
    plan = plan_host(host, facts, catalog=untouched)
    assert plan.refused is None, plan.refused
    assert not [c for c in plan.changes if "tensorrt" in c.roles]
    assert f"tensorrt: {v}, installed" in plan.notes


def test_an_installed_build_for_another_cuda_major_is_replaced() -> None:
    facts = installed(fresh_facts(), "10.13.3.9-1+cuda12.9", RUNTIME)
    plan = plan_host(trt_host("13.0", '"10.13"'), facts, catalog=trt_catalog)
    assert "libnvinfer10=10.13.3.9-1+cuda13.0" in install_targets(plan)


def test_update_latest_moves_an_installed_release_to_the_newest() -> None:
    facts = installed(fresh_facts(), "10.13.3.9-1+cuda13.0", RUNTIME)
    host = trt_host("13.0", '{version: "10", update: latest}')
    plan = plan_host(host, facts, catalog=trt_catalog)
    assert "libnvinfer10=10.14.1.48-1+cuda13.0" in install_targets(plan)
    assert any("upgrade from 10.13.3.9-1+cuda13.0" in n for n in plan.notes)


def test_a_spec_no_build_satisfies_is_refused_naming_what_the_repository_has() -> None:
    plan = plan_host(trt_host("13.0", '"10.9"'), fresh_facts(), catalog=trt_catalog)
    assert plan.refused is not None
    assert (
        "stack.tensorrt: TensorRT 10.9 for CUDA 13.0 (a +cuda13.x build of libnvinfer10) is not"
        " in " in plan.refused
    )
    assert "it has 10.13.3.9-1+cuda13.0, 10.14.1.48-1+cuda13.0" in plan.refused
    assert plan.refused.endswith('Use tensorrt: "10.14"')


def test_no_build_for_the_major_names_the_cudas_it_has() -> None:
    plan = plan_host(trt_host("12.4"), fresh_facts(), catalog=lambda: _only("13.0"))
    assert plan.refused is not None
    assert "it has no build for CUDA 12 (builds for CUDA 13.0)" in plan.refused


def _only(cuda: str) -> Catalog:
    text = "".join(
        f"Package: libnvinfer10\nVersion: 10.14.1.48-1+cuda{cuda}\nArchitecture: amd64\n"
        f"Filename: ./x.deb\nSize: 1\nSHA256: {'0' * 64}\n\n"
        for _ in [0]
    )
    base = (FIX / "Packages").read_text()
    index = parse_packages(base + "\n" + text)
    return IndexCatalog(FetchedIndex(REPO_URL, REPO_URL + "Packages", index, FETCHED, 0.0))


TOOLKITLESS = """
defaults:
  connection: local
  stack:
    tensorrt: "10"
hosts:
  gpu1: {}
"""


def test_tensorrt_without_a_cuda_toolkit_is_an_inventory_error_at_its_line() -> None:
    inv = loads(TOOLKITLESS, "inv.yaml")
    host = inv.hosts["gpu1"]
    [finding] = check_host(host)
    assert finding.loc == ("stack", "tensorrt")
    assert finding.message.startswith("TensorRT 10 builds follow the CUDA toolkit: declare cuda:")
    assert str(inv.where("gpu1", finding.loc)).startswith("inv.yaml:5")


def test_a_tensorrt_major_without_packages_for_the_cuda_major() -> None:
    host = trt_host("13.0", '"8"')
    [finding] = [f for f in check_host(host) if f.loc == ("stack", "tensorrt")]
    assert finding.message == 'TensorRT 8 has no packages for CUDA 13.0: use tensorrt: "10"'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10.13", "tensorrt: Input should be a valid"),
        ('{version: "10.13.3.9-1+cuda13.0", update: latest}', "an exact version cannot move"),
        ('{version: "10", python: yes}', "python"),
        ('"10.x"', "tensorrt.version"),
    ],
)
def test_bad_tensorrt_values_are_errors_with_a_line(value: str, message: str) -> None:
    with pytest.raises(InventoryError) as err:
        loads(TOOLKITLESS.replace('tensorrt: "10"', f"tensorrt: {value}"), "inv.yaml")
    text = str(err.value)
    assert "inv.yaml:5" in text, text
    assert message in text, text
