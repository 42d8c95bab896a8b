"""Versions come from the repository the hosts use, through real apt and dpkg on lab hosts:
an installed release of the branch is kept, a pin upgrades with one reboot, NCCL builds
follow the toolkit, and a lagging mirror is resolved against what it really has.

The lab's repository is built from its own data (gpunode_lab/repo/nvidia_repo.yaml), so
these tests see what gpunode makes of a repository it did not write."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, events, fresh, of, on_host, packages, start_lab
from tests.conftest import SLOT, slot_net

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NO_STACK: dict[str, Any] = {
    "driver": None,
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}


@pytest.fixture(scope="module")
def lagging(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One host whose NVIDIA mirror has not synced the newest releases."""
    args = ("--hosts", "1", "--ubuntu", "22.04", "--mirror", "lagging",
            "--net", str(slot_net(233)), "--port", str(2233 + 1000 * SLOT))  # fmt: skip
    yield from start_lab(tmp_path_factory, *args)


def test_an_installed_release_of_the_branch_is_kept_and_a_pin_moves_it(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, "lab-02")
    older = lab.gpunode(
        "lab", "install", "lab-02", "nvidia-open-550=550.127.05-1",
        "libnvidia-compute-550=550.127.05-0ubuntu1", "--hold", "--reboot",
    )  # fmt: skip
    assert older.returncode == 0, older.stderr
    branch = lab.inventory(tmp_path / "branch", **{**NO_STACK, "driver": {"branch": "550"}})
    assert on_host(branch, "lab-02", "cat /sys/module/nvidia/version").strip() == "550.127.05"
    boots = lab.boot_id("lab-02")

    plan = lab.gpunode("plan", str(branch), "--limit", "lab-02", "--json")
    assert plan.returncode == 0, plan.stderr
    code, evs = apply(lab, branch, "--limit", "lab-02")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert of(evs, "reboot-started") == [] and lab.boot_id("lab-02") == boots
    pk = packages(branch, "lab-02")
    assert pk["nvidia-open-550"][0].startswith("550.127.05-")  # kept, not "upgraded"

    pin = lab.inventory(tmp_path / "pin", **{**NO_STACK, "driver": {"version": "550.163.01"}})
    # `lab install --hold` held the older release as an admin would: moving it takes the flag
    code, evs = apply(lab, pin, "--limit", "lab-02", "--allow-change-held")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert len(of(evs, "reboot-started", "lab-02")) == 1
    assert lab.boot_id("lab-02") != boots
    pk = packages(pin, "lab-02")
    assert pk["nvidia-open-550"][0].startswith("550.163.01-") and pk["nvidia-open-550"][1]
    assert on_host(pin, "lab-02", "cat /sys/module/nvidia/version").strip() == "550.163.01"
    code, evs = apply(lab, pin, "--limit", "lab-02")
    assert code == 0 and of(evs, "change-started") == []


def test_an_older_release_than_the_branchs_newest_installs_on_a_fresh_host(
    lab: Lab, tmp_path: Path
) -> None:
    """nvidia-open-550=550.127.05-1 depends on its components at exactly that release, and
    apt resolves those against each one's newest (550.163.01) unless told otherwise: the
    release is pinned for apt by a preferences file before the install."""
    fresh(lab, "lab-02")
    inv = lab.inventory(tmp_path, **{**NO_STACK, "driver": {"version": "550.127.05"}})
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    pk = packages(inv, "lab-02")
    for name in ("nvidia-open-550", "nvidia-driver-550-open", "libnvidia-compute-550"):
        assert pk[name][0].startswith("550.127.05-"), (name, pk[name])
    assert on_host(inv, "lab-02", "cat /sys/module/nvidia/version").strip() == "550.127.05"
    pref = on_host(inv, "lab-02", "cat /etc/apt/preferences.d/gpunode-nvidia-driver")
    assert "Pin: version 550.127.05-*" in pref
    policy = on_host(inv, "lab-02", "apt-cache policy nvidia-driver-550-open")
    assert "Candidate: 550.127.05-" in policy, policy
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 0 and of(evs, "change-started") == []


@pytest.mark.parametrize(("toolkit", "build"), [("12.8", "2.26.2-1+cuda12.8"),
                                                ("12.9", "2.26.5-1+cuda12.9")])  # fmt: skip
def test_nccl_series_installs_the_build_for_the_toolkit(
    lab: Lab, tmp_path: Path, toolkit: str, build: str
) -> None:
    fresh(lab, "lab-02")
    stack = {**NO_STACK, "cuda": {"toolkits": [toolkit]}, "nccl": "2.26"}
    inv = lab.inventory(tmp_path, **stack)
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    pk = packages(inv, "lab-02")
    assert pk["libnccl2"] == (build, True) and pk["libnccl-dev"][0] == build
    (planned,) = of(evs, "plan-ready", "lab-02")
    assert planned["refused"] is None


def test_an_impossible_pin_is_refused_at_plan_time_naming_what_the_repository_has(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, "lab-02")
    before = lab.tree("lab-02")
    stack = {**NO_STACK, "cuda": {"toolkits": ["12.4"]}, "cudnn": "9.11"}
    inv = lab.inventory(tmp_path, **stack)
    plan = lab.gpunode("plan", str(inv), "--limit", "lab-02")
    assert plan.returncode == 4, plan.stdout + plan.stderr
    assert "lab-02: refused: stack.cudnn: cuDNN 9.11 for CUDA 12.4 is not in http://" in plan.stdout
    assert '9.12.0.46-1, 9.14.0.64-1. Use cudnn: "9" or "9.14"' in plan.stdout
    assert "1 host refused (lab-02)" in plan.stderr
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 4 and of(evs, "change-started") == []
    assert lab.tree("lab-02") == before  # nothing was written


def test_the_index_is_read_once_per_run_for_every_host(lab: Lab, tmp_path: Path) -> None:
    for host in ("lab-01", "lab-02"):  # both need versions from the index
        fresh(lab, host)
    log = lab.dir / "repo-access.log"
    start = log.stat().st_size if log.exists() else 0
    stack = {**NO_STACK, "cuda": {"toolkits": ["12.4"]}, "cudnn": "9", "nccl": "2.21"}
    inv = lab.inventory(tmp_path, **stack)
    env = {**lab.env, "GPUNODE_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):
        out = lab.gpunode("plan", str(inv), "--json", env=env)
        assert out.returncode == 0, out.stderr
    lines = log.read_text()[start:].splitlines()
    index = [ln for ln in lines if "/ubuntu2204/x86_64/Packages" in ln and "127.0." in ln]
    # one download for both hosts, then one "not modified" for the second run
    assert len([ln for ln in index if " 200 " in ln]) == 1, index
    assert len([ln for ln in index if " 304 " in ln]) == 1, index


def test_a_lagging_mirror_gets_the_newest_it_has_and_refuses_what_it_lacks(
    lagging: Lab, tmp_path: Path
) -> None:
    stack = {**NO_STACK, "driver": {"branch": "550"}, "cuda": {"toolkits": ["12.4"]},
             "cudnn": "9"}  # fmt: skip
    inv = lagging.inventory(tmp_path / "series", **stack)
    code, evs = apply(lagging, inv, "--no-smoke")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    pk = packages(inv, "lab-01")
    assert pk["libcudnn9-cuda-12"][0] == "9.12.0.46-1"  # 9.14 is not on the mirror yet
    assert pk["nvidia-open-550"][0].startswith("550.127.05-")
    assert on_host(inv, "lab-01", "cat /sys/module/nvidia/version").strip() == "550.127.05"

    pinned = lagging.inventory(tmp_path / "pin", **{**stack, "cudnn": "9.14.0.64-1"})
    plan = lagging.gpunode("plan", str(pinned))
    assert plan.returncode == 4, plan.stdout + plan.stderr
    assert (
        "refused: stack.cudnn: cuDNN 9.14.0.64-1 for CUDA 12.4 is not in http://"
    ) in plan.stdout
    assert "it has 9.1.0.70-1, 9.8.0.87-1, 9.10.2.21-1, 9.12.0.46-1. Use" in plan.stdout


def test_a_controller_that_cannot_read_the_index_asks_the_hosts_apt(
    lab: Lab, tmp_path: Path
) -> None:
    """The controller's proxy refuses (a closed port on loopback); the hosts reach the
    repository directly. apply configures the repository, then resolves with the host's
    apt; once converged, no index is needed at all."""
    fresh(lab, "lab-02")
    env = {**lab.env, "http_proxy": "http://127.0.0.1:9", "GPUNODE_CACHE_DIR": str(tmp_path)}
    stack = {**NO_STACK, "driver": {"branch": "550"}, "cuda": {"toolkits": ["12.4"]},
             "cudnn": "9"}  # fmt: skip
    inv = lab.inventory(tmp_path / "inv", **stack)
    res = lab.gpunode("apply", str(inv), "--yes", "--json", "--limit", "lab-02", env=env)
    evs = events(res.stdout)
    assert res.returncode == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    first, second = of(evs, "plan-ready", "lab-02")[:2]
    assert {c["role"] for c in first["changes"]} == {"nvidia_repo"}
    assert "cudnn" in {r for c in second["changes"] for r in c["role"].split("+")}
    pk = packages(inv, "lab-02")
    assert pk["libcudnn9-cuda-12"][0] == "9.14.0.64-1"
    assert pk["nvidia-open-550"][0].startswith("550.163.01-")

    again = lab.gpunode("apply", str(inv), "--yes", "--json", "--limit", "lab-02", env=env)
    assert again.returncode == 0 and of(events(again.stdout), "change-started") == []
    # a spec the installed version does not satisfy: planned from the host's apt, which
    # has no dependencies to follow; apt's own resolver says what the plan lacks (the
    # headers, installed at 9.14, that the 9.10 dev package needs at exactly 9.10)
    older = lab.inventory(tmp_path / "older", **{**stack, "cudnn": "9.10"})
    plan = lab.gpunode("plan", str(older), "--limit", "lab-02", env=env)
    assert plan.returncode == 4, plan.stdout + plan.stderr
    assert "apt's resolver refuses the plan" in plan.stdout
    assert "Depends: libcudnn9-headers-cuda-12 (= 9.10.2.21-1)" in plan.stdout
    # the controller's index has the dependencies: the plan names the headers and applies
    plan = lab.gpunode("plan", str(older), "--limit", "lab-02")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "libcudnn9-headers-cuda-12=9.10.2.21-1" in plan.stdout
    code, evs = apply(lab, older, "--limit", "lab-02")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert packages(older, "lab-02")["libcudnn9-headers-cuda-12"][0] == "9.10.2.21-1"
