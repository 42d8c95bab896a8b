"""`gpunode doctor` on lab hosts: each fault the lab can make (no driver, nouveau, an Xid in
the kernel log, a GPU gone, DKMS missing for the next kernel, CUDA_HOME unset) is reported
with its exit status, severity, evidence and fix; a converged host is healthy. What the
lab's stand-ins cannot model (ECC counts, remapped rows, PCIe, throttling, temperature) is
tested from recorded outputs in tests/doctor/.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from gpunode.exitcodes import ExitCode
from tests.apply.labhelpers import Lab, apply, fresh, of, on_host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STACK: dict[str, Any] = {
    "driver": {"branch": "580", "flavor": "open", "hold": True},
    "cuda": {"toolkits": ["13.0"], "default": "13.0"},
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}


def doctor(lab: Lab, inv: Path, host: str) -> tuple[int, list[dict[str, Any]]]:
    res = lab.gpunode("doctor", str(inv), "--limit", host, "--json")
    doc = json.loads(res.stdout)
    assert doc["kind"] == "doctor" and doc["exit_code"] == res.returncode, res.stderr
    return res.returncode, doc["hosts"][host]["findings"]


def rule(findings: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    hits = [f for f in findings if f["rule"] == rid]
    assert len(hits) == 1, findings
    return hits[0]


def knob(lab: Lab, host: str, *args: str) -> str:
    res = lab.gpunode("lab", "fault", host, *args)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_a_host_without_driver_then_with_nouveau(lab: Lab, tmp_path: Path) -> None:
    host = "lab-01"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    code, findings = doctor(lab, inv, host)
    assert code == ExitCode.DOCTOR_ERROR
    f = rule(findings, "driver.module-not-loaded")
    fix = f"gpunode apply {shlex.quote(str(inv))} --limit {host}"
    assert f["severity"] == "error" and fix in f["fix"]
    assert on_host(inv, host, "test -d /sys/module/nvidia || echo absent").strip() == "absent"
    assert f["evidence"] == "/sys/module/nvidia: absent (module not loaded)"
    plain = lab.gpunode("doctor", str(inv), "--limit", host)
    assert plain.returncode == ExitCode.DOCTOR_ERROR
    assert plain.stdout.startswith(f"{host}: error (")
    assert "  error    driver.module-not-loaded: the nvidia kernel module is not loaded\n" in (
        plain.stdout
    )
    assert "evidence: /sys/module/nvidia: absent (module not loaded)\n" in plain.stdout

    knob(lab, host, "nouveau")
    try:
        code, findings = doctor(lab, inv, host)
        f = rule(findings, "driver.nouveau-loaded")
        assert code == ExitCode.DOCTOR_ERROR and f["severity"] == "error"
        assert "blacklists nouveau" in f["fix"]
    finally:
        knob(lab, host, "nouveau", "--off")


def test_a_converged_host_and_its_faults(lab: Lab, tmp_path: Path) -> None:
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    code, _ = apply(lab, inv, "--limit", host)
    assert code == 0

    # converged without cuda_env: the toolkit is there, login shells do not see it
    code, findings = doctor(lab, inv, host)
    assert code == ExitCode.DOCTOR_WARNING, findings
    assert {f["severity"] for f in findings} == {"warning"}, findings
    home = rule(findings, "cuda.home-unset")
    assert home["evidence"] == "CUDA_HOME=  (a login shell's environment)"
    assert home["fix"].startswith("set `cuda_env: true` in the host's stack")
    login = "env -i HOME=/tmp bash -l -c 'echo \"[${CUDA_HOME-}]\"'"
    assert on_host(inv, host, login).strip() == "[]"

    inv = lab.inventory(tmp_path, **{**STACK, "cuda_env": True})
    code, _ = apply(lab, inv, "--limit", host)
    assert code == 0
    code, findings = doctor(lab, inv, host)
    # The lab's libraries are placeholders, not ELF files: the real ldconfig skips them, so
    # the dynamic linker finding stays, and says what the host's ldconfig says.
    assert [f["rule"] for f in findings] == ["cuda.lib-not-found"], findings
    assert findings[0]["evidence"] == "ldconfig -p: no libcudart.so"
    assert "libcudart" not in on_host(inv, host, "/sbin/ldconfig -p")
    lib = "/usr/local/cuda/targets/x86_64-linux/lib/"
    assert "libcudart.so" in on_host(inv, host, f"ls {lib}")

    # an Xid in the kernel log: the exact line, its meaning, its fix
    line = knob(lab, host, "xid", "79")
    try:
        assert line in on_host(inv, host, "cat /var/log/kern.log")
        code, findings = doctor(lab, inv, host)
        f = rule(findings, "gpu.xid")
        assert code == ExitCode.DOCTOR_ERROR and f["severity"] == "error"
        assert f["evidence"] == line and "fallen off the bus" in f["title"]
        assert f["fix"].startswith("reboot")
    finally:
        knob(lab, host, "xid", "--off")

    # a GPU gone from nvidia-smi: fewer than the inventory's gpus.count
    knob(lab, host, "gpu-lost")
    try:
        seen = on_host(inv, host, "nvidia-smi -L").splitlines()
        code, findings = doctor(lab, inv, host)
        f = rule(findings, "gpu.fewer-than-inventory")
        assert code == ExitCode.DOCTOR_ERROR
        assert f["evidence"].startswith(f"nvidia-smi lists {len(seen)} GPU")
        # apply's smoke test fails on it, and the failed host carries doctor's findings
        smoke = lab.inventory(tmp_path, **{**STACK, "cuda_env": True, "smoke": ["nvidia-smi"]})
        code, evs = apply(lab, smoke, "--limit", host)
        assert code == ExitCode.FAILED
        assert "fail" in [e["result"]["status"] for e in of(evs, "smoke-result", host)]
        found = {e["rule"]: e for e in of(evs, "doctor-finding", host)}
        assert found["gpu.fewer-than-inventory"]["evidence"] == f["evidence"]
    finally:
        knob(lab, host, "gpu-lost", "--off")

    # a newer kernel installed by an unattended upgrade: DKMS has not built for it yet
    knob(lab, host, "newer-kernel")
    nxt = on_host(inv, host, "readlink /boot/vmlinuz").strip().removeprefix("vmlinuz-")
    assert nxt not in on_host(inv, host, "dkms status")
    code, findings = doctor(lab, inv, host)
    f = rule(findings, "driver.dkms-not-built")
    assert code == ExitCode.DOCTOR_WARNING and f["severity"] == "warning"
    assert nxt in f["title"] and f"gpunode apply {shlex.quote(str(inv))} --limit {host}" in f["fix"]
