"""More of apply on lab hosts: conda envs with frameworks, and rolling changes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpunode import compat
from tests.apply.labhelpers import Lab, apply, of, on_host, wait_for_ssh
from tests.conftest import until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

# The worked example's envs (inventories/lab.yaml), with nothing else in the stack.
CONDA = {
    "prefix": "/opt/conda",
    "tos": "accept",
    "envs": {
        "torch": {"python": "3.11", "pytorch": "2.4.1"},
        "tf": {"python": "3.11", "tensorflow": "2.16.1"},
    },
}


def test_conda_envs_with_pytorch_and_tensorflow(lab: Lab, tmp_path: Path) -> None:
    assert lab.gpunode("lab", "reset", "lab-02").returncode == 0
    stack = {"driver": None, "cuda": None, "cudnn": None, "nccl": None, "cuda_env": False}
    inv = lab.inventory(tmp_path, **stack, conda=CONDA, smoke=["torch", "tensorflow"])
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    envs = on_host(inv, "lab-02", "/opt/conda/bin/conda env list --json")
    assert '"/opt/conda/envs/torch"' in envs and '"/opt/conda/envs/tf"' in envs
    # PyTorch from the wheel index of the variant the compatibility rules choose
    variant = compat.torch_variant("2.4.1", None, None)
    torch = on_host(inv, "lab-02", "/opt/conda/envs/torch/bin/python -c "
                    "'import torch; print(torch.__version__)'")  # fmt: skip
    assert torch.strip() == f"2.4.1+{variant}"
    # TensorFlow as tensorflow[and-cuda]: its CUDA wheels came along
    pip = on_host(inv, "lab-02", "/opt/conda/envs/tf/bin/python -m pip list --format=freeze")
    assert "tensorflow==2.16.1" in pip.split()
    assert any(line.startswith("nvidia-cudnn-cu12==") for line in pip.split())
    # the stand-in wheels compute nothing: the smoke tests say so rather than fail
    smoke = {e["result"]["name"]: e["result"] for e in of(evs, "smoke-result", "lab-02")}
    assert smoke["torch"]["status"] == "skip" and "stand-in" in smoke["torch"]["reason"]
    # a second run changes nothing
    code, evs = apply(lab, inv, "--limit", "lab-02", "--no-smoke")
    assert code == 0 and of(evs, "change-started") == []


def written_by_gpunode(lab: Lab, host: str) -> dict[str, str]:
    # the lab itself writes the simulated module state at each boot
    return {k: v for k, v in lab.tree(host).items() if not k.startswith("etc/gpunode-lab/")}


def test_serial_batches_stop_at_max_fail(lab: Lab, tmp_path: Path) -> None:
    for host in ("lab-01", "lab-02"):
        assert lab.gpunode("lab", "reset", host).returncode == 0
    stack = {"driver": None, "cuda": None, "cudnn": None, "nccl": None, "cuda_env": True,
             "smoke": []}  # fmt: skip
    inv = lab.inventory(tmp_path, **stack)
    before = written_by_gpunode(lab, "lab-02")
    assert lab.gpunode("lab", "fault", "lab-01", "refuse").returncode == 0
    try:
        code, evs = apply(lab, inv, "--serial", "1", "--max-fail", "0")
    finally:
        assert lab.gpunode("lab", "fault", "lab-01", "refuse", "--off").returncode == 0
    assert code == 3
    finished = {e["host"]: e["status"] for e in of(evs, "host-finished")}
    assert finished == {"lab-01": "unreachable", "lab-02": "skipped"}
    assert written_by_gpunode(lab, "lab-02") == before  # the second batch never started
    # without the fault, one host per batch: both converge
    code, evs = apply(lab, inv, "--serial", "1")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    starts = [e["host"] for e in of(evs, "change-started")]
    assert starts and starts == sorted(starts)  # lab-01's changes all before lab-02's
    for host in ("lab-01", "lab-02"):
        assert "CUDA_HOME" in on_host(inv, host, "cat /etc/profile.d/gpunode-cuda.sh")


def test_dpkg_lock_held_elsewhere_fails_the_host_naming_the_holder(
    lab: Lab, tmp_path: Path
) -> None:
    from ruamel.yaml import YAML

    assert lab.gpunode("lab", "reset", "lab-02").returncode == 0
    wait_for_ssh(lab, "lab-02")
    inv = lab.inventory(tmp_path, cuda_env=True, nccl="2.21",
                        cuda={"toolkits": ["12.4"], "default": "12.4"})  # fmt: skip
    yaml = YAML()
    doc = yaml.load(inv.read_text())
    doc["defaults"]["apt"] = {"lock_timeout": 3}
    with inv.open("w") as fh:
        yaml.dump(doc, fh)
    pid = None
    assert lab.gpunode("lab", "fault", "lab-02", "dpkg-lock").returncode == 0
    try:
        pid = on_host(inv, "lab-02", "cat /run/gpunode-lab-dpkg-lock.pid").strip()
        dpkg_before = on_host(inv, "lab-02", "dpkg-query -W -f='${Package} ${Version}\\n'")
        start = time.monotonic()
        code, evs = apply(lab, inv, "--no-smoke", "--limit", "lab-02")
        seconds = time.monotonic() - start
    finally:
        assert lab.gpunode("lab", "fault", "lab-02", "dpkg-lock", "--off").returncode == 0
    assert code == 2
    (finished,) = of(evs, "host-finished", "lab-02")
    assert finished["status"] == "failed"
    assert f"dpkg lock held by pid {pid} (python3)" in finished["message"]
    # it waited for the lock (apt's DPkg::Lock::Timeout of 3 s, for the keyring's install
    # too), then gave up: not apt's 120 s default
    assert 3 <= seconds < 60, seconds
    # nothing was installed while the lock was held
    assert on_host(inv, "lab-02", "dpkg-query -W -f='${Package} ${Version}\\n'") == dpkg_before


def test_dpkg_lock_released_within_the_timeout_is_waited_for(lab: Lab, tmp_path: Path) -> None:
    """The lock is held when apply starts and let go a few seconds later: the keyring's
    install and apt-get wait for it (apt.lock_timeout) and the host converges."""
    import subprocess
    import sys

    assert lab.gpunode("lab", "reset", "lab-02").returncode == 0
    wait_for_ssh(lab, "lab-02")
    stack = {"driver": None, "cuda": {"toolkits": ["12.4"]}, "cudnn": None, "nccl": None,
             "cuda_env": False, "smoke": []}  # fmt: skip
    inv = lab.inventory(tmp_path, **stack)
    assert lab.gpunode("lab", "fault", "lab-02", "dpkg-lock").returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "-l", "lab-02"],
        env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: list[tuple[float, dict[str, Any]]] = []  # (when it was read, the event)

    def read() -> None:
        assert proc.stdout is not None
        seen.extend((time.monotonic(), json.loads(line)) for line in proc.stdout if line[:1] == "{")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def keyring_started() -> dict[str, Any] | None:
        return next((e for _, e in list(seen) if e["event"] == "change-started"
                     and "cuda-keyring" in " ".join(e["commands"])), None)  # fmt: skip

    try:  # the keyring's install (dpkg -i) is running, under the held lock
        until(lambda: keyring_started() is not None or proc.poll() is not None, 120,
              "the keyring's change started")  # fmt: skip
        assert keyring_started() is not None and proc.poll() is None, (
            f"apply exited {proc.poll()} first: {[e['event'] for _, e in seen][-5:]}"
        )
    finally:
        released = time.monotonic()
        assert lab.gpunode("lab", "fault", "lab-02", "dpkg-lock", "--off").returncode == 0
    assert proc.wait(timeout=600) == 0, proc.stderr.read()[-2000:] if proc.stderr else ""
    reader.join(10)
    started = keyring_started()
    assert started is not None
    # it waited for the lock: the change finished only once the lock was let go
    finished = [(t, e) for t, e in seen if e["event"] == "change-finished"
                and e["index"] == started["index"]]  # fmt: skip
    assert len(finished) == 1 and finished[0][1]["status"] == "changed", finished
    assert finished[0][0] > released
    pk = on_host(inv, "lab-02", "dpkg-query -W -f='${Package} ${Version}\\n' cuda-keyring")
    assert pk.strip() == "cuda-keyring 1.1-1"
    assert on_host(inv, "lab-02", "dpkg --audit").strip() == ""
