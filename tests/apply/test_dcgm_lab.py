"""stack.dcgm through the real CLI on a lab host whose driver is loaded: NVIDIA's DCGM 4 from
the lab's NVIDIA repository (gpunode_lab/repo/catalog_dcgm.py, written from DCGM's own
packaging, not gpunode's), its nvidia-dcgm service, and the `dcgm` smoke test.

Every assertion reads the host: dpkg's database and holds, systemd's view of the unit, the
host engine's process, and the smoke test's results, which fail once the service stops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
DCGM = {"datacenter-gpu-manager-4-cuda12": ("1:4.5.2-1", True),
        "datacenter-gpu-manager-4-core": ("1:4.5.2-1", True)}  # fmt: skip


def stack() -> dict[str, Any]:
    return {
        "driver": {"branch": "550", "flavor": "open"},
        "cuda": {"toolkits": ["12.4"]},
        "cudnn": None,
        "nccl": None,
        "cuda_env": False,
        "smoke": ["dcgm"],
        "dcgm": {},
    }


def test_dcgm_installs_its_service_runs_and_its_smoke_test_passes(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, HOST)
    driver = lab.gpunode(
        "lab", "install", HOST, "nvidia-open-550=550.127.05-1",
        "libnvidia-compute-550=550.127.05-0ubuntu1", "--reboot",
    )  # fmt: skip
    assert driver.returncode == 0, driver.stderr
    inv = lab.inventory(tmp_path / "a", **stack())

    code, evs = apply(lab, inv, "--limit", HOST)
    (done,) = of(evs, "host-finished", HOST)
    assert code == 0, done["message"]
    pk = packages(inv, HOST)
    assert {n: pk.get(n) for n in DCGM} == DCGM, done["message"]
    state = on_host(inv, HOST, "systemctl is-enabled nvidia-dcgm; systemctl is-active nvidia-dcgm")
    assert state.split() == ["enabled", "active"]
    pid = on_host(inv, HOST, "cat /run/nv-hostengine.pid").strip()
    assert on_host(inv, HOST, f"test -d /proc/{pid} && echo alive").strip() == "alive"
    smoke = {e["result"]["name"]: e["result"] for e in of(evs, "smoke-result", HOST)}
    assert smoke["dcgm/discovery"]["status"] == "pass", smoke
    assert smoke["dcgm/discovery"]["value"] == 2
    assert smoke["dcgm/diag/software"]["status"] == "pass", smoke

    # the host engine stopped: `gpunode smoke --only dcgm` fails, naming why
    on_host(inv, HOST, "sudo systemctl stop nvidia-dcgm")
    res = lab.gpunode("smoke", str(inv), "--limit", HOST, "--only", "dcgm", "--json")
    assert res.returncode == 2, res.stdout + res.stderr
    (host,) = json.loads(res.stdout)["hosts"]
    failed = {r["name"]: r for r in host["results"] if r["status"] == "fail"}
    assert "Unable to connect to host engine" in failed["dcgm/discovery"]["reason"]
