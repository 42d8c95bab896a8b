"""Kernel headers and DKMS through `gpunode apply` on lab hosts: the headers of the running
kernel (and of a newer kernel waiting for the reboot) go in with the driver, the module is
built for the kernel the host boots next before it reboots, and a build that cannot happen
stops the host before the reboot with DKMS's make.log.

Every assertion reads the host: dpkg's database, `dkms status`, uname, the loaded module
and the lab's boot count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpunode_lab.repo.catalog_kernel import newer_kernel
from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STACK: dict[str, Any] = {
    "driver": {"branch": "580", "flavor": "open", "hold": True},
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}
DKMS_TASK = "driver: nvidia module built by DKMS"


def boots(lab: Lab, host: str) -> int:
    doc = json.loads(lab.gpunode("lab", "status", "--json").stdout)
    return int({h["name"]: h for h in doc["hosts"]}[host]["boots"])


def knob(lab: Lab, host: str, name: str, *, off: bool = False) -> None:
    res = lab.gpunode("lab", "fault", host, name, *(["--off"] if off else []))
    assert res.returncode == 0, res.stderr


def release(inv: Path, host: str) -> str:
    """The driver release dpkg has (libnvidia-compute-580 580.159.04-0ubuntu1 -> 580.159.04)."""
    return packages(inv, host)["libnvidia-compute-580"][0].split("-")[0]


def built_for(inv: Path, host: str, version: str, kernel: str) -> bool:
    status = on_host(inv, host, "dkms status").splitlines()
    return f"nvidia/{version}, {kernel}, x86_64: installed" in status


def loaded(inv: Path, host: str) -> str:
    return on_host(inv, host, "cat /sys/module/nvidia/version 2>/dev/null || true").strip()


def test_fresh_host_gets_headers_and_a_built_module_then_one_reboot(
    lab: Lab, tmp_path: Path
) -> None:
    host = "lab-01"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    kernel = on_host(inv, host, "uname -r").strip()
    assert f"linux-headers-{kernel}" not in packages(inv, host)
    assert on_host(inv, host, "command -v dkms || true").strip() == ""
    before = boots(lab, host)

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    pk = packages(inv, host)
    assert f"linux-headers-{kernel}" in pk and "nvidia-open-580" in pk
    version = release(inv, host)
    assert built_for(inv, host, version, kernel)
    assert boots(lab, host) == before + 1
    assert loaded(inv, host) == version

    code, evs = apply(lab, inv, "--limit", host)  # converged: nothing left to do
    assert code == 0 and of(evs, "change-finished") == [] and boots(lab, host) == before + 1


def test_newer_kernel_gets_its_headers_and_the_module_before_the_reboot(
    lab: Lab, tmp_path: Path
) -> None:
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    running = on_host(inv, host, "uname -r").strip()
    knob(lab, host, "newer-kernel")
    nxt = newer_kernel()
    assert f"linux-image-{nxt}" in packages(inv, host)
    assert on_host(inv, host, "readlink /boot/vmlinuz").strip() == f"vmlinuz-{nxt}"
    assert on_host(inv, host, "uname -r").strip() == running  # not booted yet
    before = boots(lab, host)

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    pk = packages(inv, host)
    assert {f"linux-headers-{running}", f"linux-headers-{nxt}"} <= set(pk)
    # the module was checked for the new kernel, and it was there, before the reboot
    names = [(e["event"], e.get("title")) for e in evs]
    checked = names.index(("change-finished", DKMS_TASK))
    assert checked < names.index(("reboot-started", None))
    version = release(inv, host)
    assert built_for(inv, host, version, nxt) and built_for(inv, host, version, running)
    assert boots(lab, host) == before + 1
    assert on_host(inv, host, "uname -r").strip() == nxt  # it booted the new kernel
    assert loaded(inv, host) == version


def test_no_headers_for_the_next_kernel_stops_before_the_reboot(lab: Lab, tmp_path: Path) -> None:
    host = "lab-01"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    running = on_host(inv, host, "uname -r").strip()
    knob(lab, host, "newer-kernel")
    knob(lab, host, "no-headers")
    nxt = newer_kernel()
    before = boots(lab, host)

    code, evs = apply(lab, inv, "--limit", host)
    assert code != 0
    (done,) = of(evs, "host-finished", host)
    assert done["status"] == "failed"
    message = done["message"]
    assert DKMS_TASK in message
    assert f"/var/lib/dkms/nvidia/{release(inv, host)}/build/make.log" in message
    assert f"Kernel headers for kernel {nxt} cannot be found" in message  # make.log's text
    assert of(evs, "reboot-started") == [] and boots(lab, host) == before
    assert on_host(inv, host, "uname -r").strip() == running
    assert on_host(inv, host, "dpkg --audit").strip() == ""
    assert f"linux-headers-{nxt}" not in packages(inv, host)

    knob(lab, host, "no-headers", off=True)
    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    version = release(inv, host)
    assert f"linux-headers-{nxt}" in packages(inv, host)
    assert built_for(inv, host, version, nxt)
    assert boots(lab, host) == before + 1
    assert on_host(inv, host, "uname -r").strip() == nxt
    assert loaded(inv, host) == version
