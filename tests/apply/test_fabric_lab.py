"""NVSwitch systems through `gpunode apply` on a lab 8x H200 HGX host: Fabric Manager goes in
with the driver at the driver's exact release, its service runs once that module is loaded,
and every GPU then joins the fabric; a fabric manager left at another release is found and
put right; a host without NVSwitches gets none.

The lab plays NVIDIA's side (gpunode_lab): its repository has nvidia-fabricmanager-<branch>
for every driver release, its nv-fabricmanager refuses a module of another release, and its
nvidia-smi shows the fabric "In Progress" (its libcuda's cuInit 802) until one runs at the
loaded module's release.
Every assertion reads the host: dpkg's database, apt's history, the unit's state, the loaded
module and what nvidia-smi says.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages, start_lab
from tests.conftest import SLOT, slot_net

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-01"
STACK: dict[str, Any] = {"driver": {"branch": "580", "flavor": "open", "hold": True},
                         "cuda": None, "cudnn": None, "nccl": None, "cuda_env": False,
                         "smoke": ["nvidia-smi"]}  # fmt: skip
FM = "nvidia-fabricmanager-580"
FABRIC = "nvidia-smi --query-gpu=fabric.state,fabric.status --format=csv,noheader"


@pytest.fixture(scope="module")
def hgx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One 8x H200 HGX host: eight GPUs behind four NVSwitches."""
    args = ("--hosts", "1", "--gpus", "8", "--model", "H200-HGX", "--ubuntu", "24.04",
            "--net", str(slot_net(247)), "--port", str(2247 + 1000 * SLOT))  # fmt: skip
    yield from start_lab(tmp_path_factory, *args)


def upstream(version: str) -> str:
    """580.95.05-1 and 580.95.05-0ubuntu1 -> 580.95.05."""
    return version.split("-")[0]


def state(inv: Path) -> dict[str, Any]:
    """What the host says of the driver, the fabric manager and the fabric."""
    pk = packages(inv, HOST)
    unit = on_host(inv, HOST, "systemctl is-enabled nvidia-fabricmanager; "
                   "systemctl is-active nvidia-fabricmanager; true").split()  # fmt: skip
    return {
        "module": on_host(inv, HOST, "cat /sys/module/nvidia/version").strip(),
        "driver": pk["libnvidia-compute-580"],
        "fm": pk[FM],
        "unit": unit,
        "fabric": set(on_host(inv, HOST, FABRIC + " || true").splitlines()),
    }


def converged_at(inv: Path, release: str) -> None:
    s = state(inv)
    assert s["module"] == release
    assert upstream(s["driver"][0]) == upstream(s["fm"][0]) == release, s
    assert s["driver"][1] and s["fm"][1]  # held alike
    assert s["unit"] == ["enabled", "active"]
    assert s["fabric"] == {"Completed, Success"}


def smoke(evs: list[dict[str, Any]]) -> dict[str, str]:
    return {e["result"]["name"]: e["result"]["status"] for e in of(evs, "smoke-result", HOST)}


def test_fresh_hgx_host_converges_with_fabric_manager_in_lockstep(hgx: Lab, tmp_path: Path) -> None:
    fresh(hgx, HOST)
    inv = hgx.inventory(tmp_path, **STACK)
    facts = json.loads(hgx.gpunode("facts", str(inv), "--json").stdout)["hosts"][HOST]["facts"]
    assert [s["device_id"] for s in facts["nvswitches"]] == ["22a3"] * 4
    assert FM not in packages(inv, HOST)

    code, evs = apply(hgx, inv)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    release = upstream(packages(inv, HOST)["nvidia-open-580"][0])
    converged_at(inv, release)
    assert smoke(evs)["nvidia-smi/fabric"] == smoke(evs)["cuda-init"] == "pass"

    code, evs = apply(hgx, inv)  # converged: nothing left to do
    assert code == 0 and of(evs, "change-finished") == [] and of(evs, "reboot-started") == []


def test_a_driver_change_moves_fabric_manager_in_the_same_apt_transaction(
    hgx: Lab, tmp_path: Path
) -> None:
    fresh(hgx, HOST)

    def pinned(version: str) -> Path:
        driver = {"version": version, "flavor": "open", "hold": True}
        return hgx.inventory(tmp_path / version, **{**STACK, "driver": driver})

    # an older release of the branch, as an image might carry it: kept, and its service run
    older = hgx.gpunode("lab", "install", HOST, "nvidia-open-580=580.95.05-1",
                        "libnvidia-compute-580=580.95.05-0ubuntu1", f"{FM}=580.95.05-1",
                        "--reboot")  # fmt: skip
    assert older.returncode == 0, older.stderr
    inv = hgx.inventory(tmp_path / "branch", **STACK)
    code, evs = apply(hgx, inv, "--no-smoke")
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    converged_at(inv, "580.95.05")

    inv = pinned("580.159.04")
    code, evs = apply(hgx, inv)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    converged_at(inv, "580.159.04")
    # apt's own record of its last transaction: the driver and Fabric Manager moved together
    history = on_host(inv, HOST, "cat /var/log/apt/history.log").split("Start-Date:")[-1]
    for name in (FM, "libnvidia-compute-580", "nvidia-open-580"):
        assert f"{name}:amd64 (580.95.05-" in history, history
    assert "580.159.04-1)" in history.split(f"{FM}:amd64 ")[1].split("),")[0] + ")"


def test_fabric_manager_left_at_another_release_is_found_and_fixed(
    hgx: Lab, tmp_path: Path
) -> None:
    inv = hgx.inventory(tmp_path, **STACK)
    code, _ = apply(hgx, inv, "--no-smoke")
    assert code == 0
    release = state(inv)["module"]
    older = hgx.gpunode("lab", "install", HOST, f"{FM}=580.65.06-1", "--reboot")
    assert older.returncode == 0, older.stderr

    # after the boot the old fabric manager refuses the module: no fabric, and smoke says so
    s = state(inv)
    assert s["fm"][0] == "580.65.06-1" and s["module"] == release
    assert s["unit"] == ["enabled", "inactive"]
    assert s["fabric"] == {"In Progress, N/A"}
    log = on_host(inv, HOST, "cat /var/log/fabricmanager.log")
    assert f"version 580.65.06 don't match with driver version {release}" in log
    res = hgx.gpunode("smoke", str(inv), "--json")
    assert res.returncode != 0
    (said,) = json.loads(res.stdout)["hosts"]
    results = {r["name"]: r for r in said["results"]}
    assert results["nvidia-smi/fabric"]["status"] == "fail"
    assert "8 of 8 GPUs not in the fabric" in results["nvidia-smi/fabric"]["reason"]
    assert results["cuda-init"]["status"] == "fail"
    assert "802 (CUDA_ERROR_SYSTEM_NOT_READY" in results["cuda-init"]["reason"]

    plan = json.loads(hgx.gpunode("plan", str(inv), "--json").stdout)
    reasons = [c["reason"] for c in plan["hosts"][HOST]["changes"]]
    assert f"{FM} 580.65.06-1 installed, {release}-* wanted" in reasons
    assert state(inv)["fm"][0] == "580.65.06-1"  # plan wrote nothing

    code, evs = apply(hgx, inv)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    assert of(evs, "reboot-started") == []  # the module was right: no reboot
    converged_at(inv, release)
    assert smoke(evs)["nvidia-smi/fabric"] == smoke(evs)["cuda-init"] == "pass"


def test_a_host_without_nvswitch_gets_no_fabric_manager(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, "lab-02")
    inv = lab.inventory(tmp_path, **STACK)
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    pk = packages(inv, "lab-02")
    assert "nvidia-open-580" in pk
    assert not [n for n in pk if n.startswith("nvidia-fabricmanager")]
    assert on_host(inv, "lab-02", "ls /lib/systemd/system/nvidia-fabricmanager.service "
                   "2>/dev/null; true").strip() == ""  # fmt: skip
    names = {e["result"]["name"] for e in of(evs, "smoke-result", "lab-02")}
    assert "nvidia-smi/gpus" in names and not names & {"nvidia-smi/fabric", "cuda-init"}
