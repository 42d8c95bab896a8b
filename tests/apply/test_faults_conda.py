"""The fault suite's conda, smoke and managed-file cases: the controller SIGKILLed while
the host runs the conda installer, creates a conda env, or runs the smoke suite; the host
powered off while it creates a conda env, or while it writes a managed file. Each run goes
through the CLI; the re-apply must converge to the end state of a run nobody interrupted,
read from the host: the files under the conda prefix, conda's own list of envs and its
registry (~/.conda/environments.txt), the env's Python record, and the smoke results.

The moment is caught inside the host by the watcher of `moments.py` (it stops the step's
processes). After the controller is killed, those processes are killed too: a step that
prints dies of SIGPIPE on its closed session, so the host is left with the step half done.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moments import popen_apply, start_watcher, stopped, wait_for_moment

from tests.apply.labhelpers import Lab, apply, events, fresh, of, on_host, wait_for_ssh

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
CONDA = {
    "prefix": "/opt/conda",
    "tos": "accept",
    "envs": {"torch": {"python": "3.11", "pytorch": "2.4.1"}},
}
STACK: dict[str, Any] = {
    "driver": None,
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "conda": CONDA,
    "smoke": ["torch"],
}
# each moment: the processes, and a path they have made by then. The installer's
# `python -m venv`; the env's, once its python is there (conda's record of it is not yet,
# and pip is being put in); the suite
MOMENTS = {
    "conda": ("-m venv /opt/conda", ""),
    "conda_env": ("-m venv /opt/conda/envs/torch", "/opt/conda/envs/torch/bin/python"),
    "smoke": ("gpunode-smoke.", ""),
}


def conda_state(lab: Lab, inv: Path, host: str) -> dict[str, Any]:
    """What conda has on the host: its files (compiled caches aside: their timestamps
    differ), its envs, its registry and the env's recorded Python."""
    files = sorted(
        k for k in lab.tree(host) if k.startswith("opt/conda/") and "__pycache__" not in k
    )
    envs = json.loads(on_host(inv, host, "/opt/conda/bin/conda env list --json"))["envs"]
    registry = on_host(inv, host, "sudo cat /root/.conda/environments.txt").splitlines()
    meta = on_host(inv, host, "cat /opt/conda/envs/torch/conda-meta/python-*.json")
    torch = on_host(inv, host, "/opt/conda/envs/torch/bin/python -c "
                    "'import torch; print(torch.__version__)'")  # fmt: skip
    return {
        "files": files,
        "envs": envs,
        "registry": registry,
        "python": json.loads(meta)["version"],
        "torch": torch.strip(),
    }


def smoke_results(evs: list[dict[str, Any]], host: str) -> list[tuple[str, str]]:
    return [(e["result"]["name"], e["result"]["status"]) for e in of(evs, "smoke-result", host)]


@pytest.fixture(scope="module")
def reference(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """lab-01 converged from fresh by a run nobody interrupted."""
    fresh(lab, "lab-01")
    inv = lab.inventory(tmp_path_factory.mktemp("conda-ref"), **STACK)
    code, evs = apply(lab, inv, "-l", "lab-01")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    smoke = smoke_results(evs, "lab-01")
    assert ("environments", "pass") in smoke and all(s != "fail" for _, s in smoke), smoke
    yield {**conda_state(lab, inv, "lab-01"), "smoke": smoke}
    for host in ("lab-01", HOST):
        fresh(lab, host)


def converges(lab: Lab, inv: Path, reference: dict[str, Any]) -> None:
    """The re-apply exits 0 with the smoke results of the reference, the host's conda equals
    the reference's, and a third apply changes nothing."""
    suites = "ls -d /tmp/gpunode-smoke.* 2>/dev/null || true"
    left = on_host(inv, HOST, suites)  # a suite killed mid-run leaves its folder
    assert len(left.split()) <= 1, left
    code, evs = apply(lab, inv, "-l", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    got = {**conda_state(lab, inv, HOST), "smoke": smoke_results(evs, HOST)}
    assert got == reference
    code, evs = apply(lab, inv, "-l", HOST)
    assert code == 0 and of(evs, "change-started") == []
    # the runs that finished left no suite folder of their own
    assert on_host(inv, HOST, suites) == left


@pytest.mark.parametrize("at", ["conda", "conda_env", "smoke"])
def test_controller_killed_mid_conda_or_smoke_then_apply_converges(
    lab: Lab, tmp_path: Path, reference: dict[str, Any], at: str
) -> None:
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **STACK)
    start_watcher(inv, HOST, "argv", *MOMENTS[at])
    proc = popen_apply(lab, inv, HOST)
    try:
        seen = wait_for_moment(lab, HOST, proc)
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    evs = events(out)
    assert not of(evs, "recap")
    if at == "smoke":  # every change was done; the suite had begun
        assert not of(evs, "smoke-result") and of(evs, "change-finished", HOST)
    else:  # the kill landed inside the step: begun, never finished
        started = of(evs, "change-started", HOST)
        title = started[-1]["title"]  # the installer's change, or the env's
        assert started[-1]["role"] == "conda" and ("conda env torch" in title) == (
            at == "conda_env"
        ), started
        finished = [e["title"] for e in of(evs, "change-finished", HOST)]
        assert started[-1]["title"] not in finished, evs
    on_host(inv, HOST, "sudo kill -KILL " + " ".join(str(p) for p in stopped(seen)))
    converges(lab, inv, reference)


def test_power_lost_mid_conda_env_then_apply_converges(
    lab: Lab, tmp_path: Path, reference: dict[str, Any]
) -> None:
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **STACK)
    boot = lab.boot_id(HOST)
    start_watcher(inv, HOST, "argv", *MOMENTS["conda_env"])
    proc = popen_apply(lab, inv, HOST)
    try:
        wait_for_moment(lab, HOST, proc)
        half = lab.upper(HOST) / "opt/conda/envs/torch"
        assert half.is_dir() and not (half / "conda-meta").exists()  # half made
        assert lab.gpunode("lab", "reboot", HOST).returncode == 0
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (2, 3), out[-2000:] + err[-2000:]  # failed, or unreachable
    (finished,) = of(events(out), "host-finished", HOST)
    assert finished["status"] in ("failed", "unreachable"), finished
    assert "the SSH connection was lost while it ran" in finished["message"], finished
    wait_for_ssh(lab, HOST)
    assert lab.boot_id(HOST) != boot
    converges(lab, inv, reference)


PROFILE = "etc/profile.d/gpunode-cuda.sh"


MV = "/usr/local/bin/mv"
SLOW_MV = f"""#!/bin/sh
# test stand-in: the rename onto /{PROFILE} waits, then mv does it
for a; do last=$a; done
[ "$last" = /{PROFILE} ] && sleep 30
exec /usr/bin/mv "$@"
"""


def test_power_lost_mid_file_write_leaves_the_old_file_whole(lab: Lab, tmp_path: Path) -> None:
    """A managed file goes to a mktemp file beside it, renamed over it once whole: stopped
    between the two and powered off, the host has the old file, whole, until a re-apply
    puts the new one."""
    fresh(lab, HOST)
    stack = {**STACK, "conda": None, "smoke": [], "cuda_env": True}
    inv = lab.inventory(tmp_path, **stack)
    target = lab.upper(HOST) / PROFILE
    on_host(inv, HOST, f"echo 'export OLD=1' | sudo tee /{PROFILE} >/dev/null")
    old = target.read_bytes()
    boot = lab.boot_id(HOST)
    # The write step is over in milliseconds: an `mv` first on PATH holds its rename of this
    # file, so the moment between the whole temporary file and the rename lasts.
    on_host(inv, HOST, f"printf %s {shlex.quote(SLOW_MV)} | sudo tee {MV} >/dev/null"
                       f" && sudo chmod 755 {MV}")  # fmt: skip
    # the write step's shell, once its temporary file is there
    start_watcher(inv, HOST, "argv", ".gpunode-cuda.sh.XXXXXX", "/etc/profile.d/.gpunode-cuda.sh.*")
    proc = popen_apply(lab, inv, HOST)
    try:
        wait_for_moment(lab, HOST, proc)
        assert target.read_bytes() == old  # mid-write, the file is the old one
        assert lab.gpunode("lab", "reboot", HOST).returncode == 0
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        wait_for_ssh(lab, HOST)
        on_host(inv, HOST, f"sudo rm -f {MV}")
    assert proc.returncode in (2, 3), out[-2000:] + err[-2000:]  # failed, or unreachable
    wait_for_ssh(lab, HOST)
    assert lab.boot_id(HOST) != boot
    assert target.read_bytes() == old  # after the power loss too
    leftovers = sorted(p.name for p in target.parent.glob(".gpunode-cuda.sh.*"))
    for n in leftovers:  # private while written; opened to 0644 only once whole
        left = target.parent / n
        if left.stat().st_mode & 0o777 != 0o600:
            text = left.read_text()
            assert "export CUDA_HOME=/usr/local/cuda" in text and text.endswith("\n"), n
    code, evs = apply(lab, inv, "-l", HOST)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    new = target.read_text()
    assert new.startswith("# ") and "export CUDA_HOME=/usr/local/cuda" in new and new.endswith("\n")
    code, evs = apply(lab, inv, "-l", HOST)
    assert code == 0 and of(evs, "change-started") == []
