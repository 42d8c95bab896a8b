"""The fault suite's dpkg cases: a connection dropped mid-apt, power lost mid-dpkg, the
controller killed mid-apply. Each run goes through the CLI; every assertion reads the
hosts' real end state (dpkg's database, `dpkg --audit`, files, the loaded module).

The moment is caught inside the host: a watcher (started detached, outside any SSH
session) polls /proc for apt's download methods or dpkg's --unpack / --configure, stops
them with SIGSTOP so the moment holds, and writes a marker the test polls for from
outside (the host's overlay upper directory). The fault then lands on stopped processes.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Lab, apply, events, fresh, of, on_host, packages, wait_for_ssh

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STACK: dict[str, Any] = {
    "driver": None,
    "cuda": {"toolkits": ["12.4"]},
    "cudnn": "9",
    "nccl": "2.21",
    "cuda_env": False,
    "smoke": [],
}
MARKER = "var/tmp/gpunode-fault-moment"
WATCHER = r"""
import os, signal, sys, time
mode, marker = sys.argv[1], sys.argv[2]

def procs():
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as fh:
                    raw = fh.read()
            except OSError:
                continue
            argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
            if argv:
                yield int(d), argv

def is_dpkg(argv):
    return os.path.basename(argv[0]) == "dpkg"

seen_unpack = False
deadline = time.time() + 180
while time.time() < deadline:
    ps = list(procs())
    apt = [p for p, a in ps if os.path.basename(a[0]) == "apt-get" and "install" in a]
    dpkg = [(p, a) for p, a in ps if is_dpkg(a)]
    hit = None
    if mode == "download":
        methods = [p for p, a in ps if a[0].startswith("/usr/lib/apt/methods/")]
        if apt and methods and not dpkg:
            hit = apt + methods
    else:
        for p, a in dpkg:
            debs = [x for x in a if x.endswith(".deb") and "cuda-keyring" not in x]
            if "--unpack" in a and debs:
                seen_unpack = True
                if mode == "unpack" and any(
                    n.isdigit() for n in os.listdir("/var/lib/dpkg/updates")
                ):
                    hit = [p for p, _ in dpkg] + apt
            if mode == "configure" and seen_unpack and (
                "--configure" in a or "--triggers-only" in a
            ):
                hit = [p for p, _ in dpkg] + apt
    if hit:
        for p in hit:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        with open(marker + ".tmp", "w") as fh:
            fh.write(mode + "\n" + "\n".join(" ".join(a) for _, a in dpkg) + "\n")
        os.rename(marker + ".tmp", marker)
        sys.exit(0)
    time.sleep(0.005)
"""


def start_watcher(inv: Path, host: str, mode: str) -> None:
    """Start the watcher detached from the SSH session (a fault on sessions spares it)."""
    code = base64.b64encode(WATCHER.encode()).decode()
    on_host(
        inv,
        host,
        f"sudo rm -f /{MARKER} && echo {code} | base64 -d | sudo tee /var/tmp/watch.py "
        f">/dev/null && sudo sh -c 'setsid /usr/bin/python3 /var/tmp/watch.py {mode} "
        f"/{MARKER} </dev/null >/dev/null 2>&1 &'",
    )


def popen_apply(lab: Lab, inv: Path, host: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", "-l", host],
        env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for_moment(lab: Lab, host: str, proc: subprocess.Popen[str], timeout: float = 60) -> str:
    marker = lab.upper(host) / MARKER
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"apply ended before the moment: {out[-2000:]} {err[-2000:]}")
        assert time.monotonic() < deadline, "the moment never came"
        time.sleep(0.02)
    return marker.read_text()


@pytest.fixture(scope="module")
def reference(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """lab-01 converged from fresh by a run nobody interrupted."""
    fresh(lab, "lab-01")
    inv = lab.inventory(tmp_path_factory.mktemp("ref"), **STACK)
    code, evs = apply(lab, inv, "-l", "lab-01")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "HostFinished")]
    yield packages(inv, "lab-01")
    for host in ("lab-01", "lab-02"):  # fresh hosts for the tests that come after these
        fresh(lab, host)


def converge_and_compare(
    lab: Lab, inv: Path, host: str, reference: dict[str, Any], recovered: bool
) -> None:
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "HostFinished")]
    titles = [c["title"] for c in of(evs, "ChangeStarted", host)]
    assert ("finish an interrupted dpkg run" in titles) == recovered, titles
    if recovered:
        assert titles[0] == "finish an interrupted dpkg run"
    assert on_host(inv, host, "sudo dpkg --audit").strip() == ""
    assert packages(inv, host) == reference
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0 and of(evs, "ChangeStarted") == []


@pytest.mark.parametrize("moment", ["download", "unpack", "configure"])
def test_connection_dropped_mid_apt(
    lab: Lab, tmp_path: Path, reference: dict[str, Any], moment: str
) -> None:
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    start_watcher(inv, host, moment)
    proc = popen_apply(lab, inv, host)
    try:
        seen = wait_for_moment(lab, host, proc)
        assert lab.gpunode("lab", "fault", host, "drop", "0").returncode == 0
        out, err = proc.communicate(timeout=60)
    finally:
        assert lab.gpunode("lab", "fault", host, "drop", "--off").returncode == 0
        if proc.poll() is None:
            proc.kill()
    assert seen.startswith(moment), seen
    assert proc.returncode in (2, 3), out[-2000:] + err[-2000:]
    evs = events(out)
    (finished,) = of(evs, "HostFinished", host)
    assert finished["status"] in ("failed", "unreachable"), finished
    assert "the SSH connection was lost while it ran" in finished["message"], finished
    interrupted = on_host(inv, host, "sudo dpkg --audit").strip() != ""
    assert interrupted == (moment != "download")
    converge_and_compare(lab, inv, host, reference, recovered=interrupted)


def test_power_lost_mid_dpkg(lab: Lab, tmp_path: Path, reference: dict[str, Any]) -> None:
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    boot = lab.boot_id(host)
    start_watcher(inv, host, "unpack")
    proc = popen_apply(lab, inv, host)
    try:
        wait_for_moment(lab, host, proc)
        assert lab.gpunode("lab", "reboot", host).returncode == 0
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (2, 3), out[-2000:] + err[-2000:]
    (finished,) = of(events(out), "HostFinished", host)
    assert finished["status"] in ("failed", "unreachable"), finished
    assert "the SSH connection was lost while it ran" in finished["message"], finished
    wait_for_ssh(lab, host)
    assert lab.boot_id(host) != boot
    assert on_host(inv, host, "sudo dpkg --audit").strip() != ""
    converge_and_compare(lab, inv, host, reference, recovered=True)


DRIVER: dict[str, Any] = {
    "driver": {"branch": "550", "flavor": "open", "hold": True},
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}
# written by the lab at each boot, and the host's own identity (name, machine id, host key)
NOT_GPUNODE = (
    "etc/gpunode-lab/",
    "etc/hostname",
    "etc/hosts",
    "etc/machine-id",
    "etc/ssh/ssh_host_",
)


def end_state(inv: Path, lab: Lab, host: str) -> dict[str, Any]:
    tree = {k: v for k, v in lab.tree(host).items() if not k.startswith(NOT_GPUNODE)}
    return {
        "packages": packages(inv, host),
        "tree": tree,
        "module": on_host(inv, host, "cat /sys/module/nvidia/version").strip(),
    }


@pytest.fixture(scope="module")
def driver_reference(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory, reference: dict[str, Any]
) -> dict[str, Any]:
    """lab-01 converged to DRIVER from fresh by a run nobody interrupted."""
    fresh(lab, "lab-01")
    inv = lab.inventory(tmp_path_factory.mktemp("driver-ref"), **DRIVER)
    code, evs = apply(lab, inv, "-l", "lab-01")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "HostFinished")]
    assert len(of(evs, "RebootStarted", "lab-01")) == 1
    return end_state(inv, lab, "lab-01")


def kill_when(lab: Lab, inv: Path, host: str, at: str) -> list[dict[str, Any]]:
    """Run apply and SIGKILL it once the event `at` names begins; the events it wrote."""
    proc = popen_apply(lab, inv, host)
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    killed = False
    try:
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            e = json.loads(line)
            seen.append(e)
            hit = (e["event"] == "ChangeStarted" and e["role"] == at) or (
                at == "reboot" and e["event"] == "RebootStarted"
            )
            if hit:
                time.sleep(0.3 if at != "reboot" else 0.5)
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
                break
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert killed and proc.returncode == -signal.SIGKILL, seen
    return seen + events(rest)


@pytest.mark.parametrize("at", ["nvidia_repo", "driver", "reboot"])
def test_controller_killed_then_apply_converges(
    lab: Lab, tmp_path: Path, driver_reference: dict[str, Any], at: str
) -> None:
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **DRIVER)
    boot = lab.boot_id(host)
    evs = kill_when(lab, inv, host, at)
    # the kill landed inside the step it meant to: begun, never finished
    if at == "reboot":
        assert of(evs, "RebootStarted", host) and not of(evs, "RebootFinished", host)
    else:
        started = of(evs, "ChangeStarted", host)
        assert started[-1]["role"] == at, started
        finished = [e["title"] for e in of(evs, "ChangeFinished", host)]
        assert started[-1]["title"] not in finished, evs
    assert not of(evs, "Recap")
    if at == "reboot":  # the reboot command went out before the kill: wait it through
        deadline = time.monotonic() + 60
        while lab.boot_id(host) == boot:
            assert time.monotonic() < deadline, "the host never rebooted"
            time.sleep(0.2)
    wait_for_ssh(lab, host)
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "HostFinished")]
    if at == "reboot":  # the reboot it began happened: nothing is left to do
        assert of(evs, "ChangeStarted") == [] and of(evs, "RebootStarted") == []
    assert on_host(inv, host, "sudo dpkg --audit").strip() == ""
    got = end_state(inv, lab, host)
    ref = driver_reference
    assert got["packages"] == ref["packages"]
    assert got["module"] == ref["module"] == "550.163.01"
    keys = set(got["tree"]) | set(ref["tree"])
    diff = sorted(k for k in keys if got["tree"].get(k) != ref["tree"].get(k))
    assert diff == [], " ".join(diff)
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0 and of(evs, "ChangeStarted") == []
