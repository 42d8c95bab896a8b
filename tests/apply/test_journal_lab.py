"""The step journal on lab hosts, through the CLI: the controller (`gpunode apply`) is
SIGKILLed inside a change of several commands, at a moment the lab's `block` knob holds
(update-initramfs after the nouveau blacklist file, the hold record after `apt-mark hold`,
ldconfig after the ld.so.conf file); the next apply runs each cut change again, whole, and
the host ends as one converged by a run nobody interrupted: the initramfs blacklists
nouveau (and nvidia loads after the reboot), ldconfig ran after the file, the hold record
lists the held packages, and a third plan is empty."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_faults_dpkg import NOT_GPUNODE

from tests.apply.labhelpers import Lab, apply, events, fresh, of, on_host, packages, wait_for_ssh

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STACK: dict[str, Any] = {
    "driver": {"branch": "550", "flavor": "open", "hold": True},
    "cuda": {"toolkits": ["12.4"]},
    "cudnn": None,
    "nccl": None,
    "cuda_env": True,
    "smoke": [],
}
BLACKLIST = "/etc/modprobe.d/gpunode-blacklist-nouveau.conf"
LDCONF = "/etc/ld.so.conf.d/gpunode-cuda.conf"
JOURNAL = "/var/lib/gpunode/journal"


def knob(lab: Lab, host: str, *args: str) -> None:
    out = lab.gpunode("lab", "fault", host, *args)
    assert out.returncode == 0, out.stdout + out.stderr


def kill_when_blocked(
    lab: Lab, inv: Path, host: str, block: str, tmp: Path
) -> list[dict[str, Any]]:
    """Block the command `block` names, run apply, SIGKILL it once the command waits, then
    kill the waiting command (as a session cut under it leaves it); the events it wrote."""
    name = block.removeprefix("after:").split()[0]
    marker = lab.upper(host) / f"var/tmp/gpunode-lab-blocked-{name}"
    knob(lab, host, "block", block)
    out = tmp / f"apply-{name}.jsonl"
    with out.open("w") as fh:
        argv = [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "-l", host]
        proc = subprocess.Popen(argv, env=lab.env, stdout=fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, (
                f"apply ended before {block} ran:\n{out.read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, f"{block} never ran"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        knob(lab, host, "block", "--off")
    return events(out.read_text())


def started(evs: list[dict[str, Any]], host: str) -> list[str]:
    return [e["title"] for e in of(evs, "change-started", host)]


def planned(evs: list[dict[str, Any]], host: str) -> dict[str, str]:
    """Each planned change's title and reason, from the first plan of the run."""
    (first, *_) = of(evs, "plan-ready", host)
    return {f"{c['role']}: {c['task']}": c["reason"] for c in first["changes"]}


def entry_run(inv: Path, host: str) -> str:
    """The run named in the host's one journal entry."""
    (doc,) = on_host(inv, host, f"sudo sh -c 'cat {JOURNAL}/*.json'").splitlines()
    return str(json.loads(doc)["run"])


def entries(inv: Path, host: str) -> list[str]:
    return on_host(inv, host, f"sudo ls -A {JOURNAL} 2>/dev/null || true").split()


def end_state(lab: Lab, inv: Path, host: str) -> dict[str, Any]:
    tree = {k: v for k, v in lab.tree(host).items() if not k.startswith(NOT_GPUNODE)}
    kernel = on_host(inv, host, "uname -r").strip()
    return {
        "packages": packages(inv, host),
        "tree": tree,
        "module": on_host(inv, host, "cat /sys/module/nvidia/version").strip(),
        "nouveau": on_host(inv, host, "test -d /sys/module/nouveau && echo loaded || true").strip(),
        "initramfs": on_host(inv, host, f"cat /boot/initrd.img-{kernel}").splitlines()[1:],
        "holds": on_host(inv, host, "cat /var/lib/gpunode/holds").split(),
        "showhold": sorted(on_host(inv, host, "apt-mark showhold").split()),
        "journal": entries(inv, host),
    }


def test_changes_cut_mid_way_run_again_whole(lab: Lab, tmp_path: Path) -> None:
    ref_host, host = "lab-01", "lab-02"
    inv = lab.inventory(tmp_path, **STACK)

    # the reference: nouveau loaded, converged by one run nobody interrupted
    fresh(lab, ref_host)
    knob(lab, ref_host, "nouveau")
    code, evs = apply(lab, inv, "-l", ref_host)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    ref = end_state(lab, inv, ref_host)
    assert ref["nouveau"] == "" and ref["module"] == "550.163.01"
    assert "blacklist nouveau" in ref["initramfs"]
    assert ref["holds"] == ref["showhold"] != []
    assert ref["journal"] == []

    fresh(lab, host)
    knob(lab, host, "nouveau")

    # 1. cut while the initramfs is rebuilt: the blacklist file is written, the image is not
    evs = kill_when_blocked(lab, inv, host, "update-initramfs", tmp_path)
    assert started(evs, host)[-1] == "driver: blacklist nouveau"
    kernel = on_host(inv, host, "uname -r").strip()
    assert on_host(inv, host, f"cat {BLACKLIST}").startswith("# managed by gpunode")
    image = on_host(inv, host, f"cat /boot/initrd.img-{kernel} 2>/dev/null || true")
    assert "blacklist nouveau" not in image
    assert len(entries(inv, host)) == 3  # KEY.json, KEY.step, KEY.1.in (the file's stdin)
    run1 = entry_run(inv, host)

    # 2. the next run begins with it again; cut after `apt-mark hold`, before the record
    evs = kill_when_blocked(lab, inv, host, "after:apt-mark hold", tmp_path)
    reasons = planned(evs, host)
    assert reasons["driver: blacklist nouveau"] == f"interrupted at its 2nd command in run {run1}"
    assert "blacklist nouveau" in on_host(inv, host, f"cat /boot/initrd.img-{kernel}")
    held = sorted(on_host(inv, host, "apt-mark showhold").split())
    assert held == ref["showhold"]
    recorded = on_host(inv, host, "cat /var/lib/gpunode/holds 2>/dev/null || true").split()
    assert not set(held) <= set(recorded), "the kill came after the record"

    # 3. cut while ldconfig runs, after the ld.so.conf file was written
    evs = kill_when_blocked(lab, inv, host, "ldconfig", tmp_path)
    transaction = next(t for t in planned(evs, host) if t.startswith("driver+cuda_toolkit: "))
    assert planned(evs, host)[transaction].startswith("interrupted at its ")
    assert on_host(inv, host, f"cat {LDCONF}").startswith("# Managed by gpunode")
    cache = on_host(inv, host, "stat -c %i /etc/ld.so.cache").strip()

    # 4. the next run converges, ldconfig's run among the changes it says why it runs again
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    reasons = planned(evs, host)
    (ld,) = [t for t in reasons if t.startswith("cuda_env: CUDA libraries")]
    assert reasons[ld].startswith("interrupted at its 2nd command in run")
    assert of(evs, "reboot-finished", host)
    # ldconfig ran after the file: a new cache (renamed into place), newer than the file
    assert on_host(inv, host, "stat -c %i /etc/ld.so.cache").strip() != cache
    assert (
        on_host(inv, host, f"find /etc/ld.so.cache -newer {LDCONF}").strip() == "/etc/ld.so.cache"
    )

    got = end_state(lab, inv, host)
    assert got["nouveau"] == "" and got["module"] == ref["module"]  # nvidia loads, nouveau not
    assert got["initramfs"] == ref["initramfs"]
    assert got["holds"] == got["showhold"] == ref["holds"]
    assert got["journal"] == []
    assert got["packages"] == ref["packages"]
    # apt's empty list lock takes the mode of the first apt-get update that made it: here
    # the resolver's simulation (plan/simulate.py, under umask 077) once the repository is
    # configured; on a fresh host's run the transaction's update
    keys = (set(got["tree"]) | set(ref["tree"])) - {"var/lib/apt/lists/lock"}
    diff = sorted(k for k in keys if got["tree"].get(k) != ref["tree"].get(k))
    assert diff == [], [(k, got["tree"].get(k), ref["tree"].get(k)) for k in diff]

    # 5. and the run after that has nothing to do
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0 and of(evs, "change-started") == []
    wait_for_ssh(lab, host)
