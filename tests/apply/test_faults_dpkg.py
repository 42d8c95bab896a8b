"""The fault suite's dpkg cases: a connection dropped mid-apt, power lost mid-dpkg, the
controller killed mid-apply. Each run goes through the CLI; every assertion reads the
hosts' real end state (dpkg's database, `dpkg --audit`, files, the loaded module).

The moment is caught inside the host: a watcher (started detached, outside any SSH
session) polls /proc for apt's download methods or dpkg's --unpack / --configure, stops
them with SIGSTOP so the moment holds, and writes a marker the test polls for from
outside (the host's overlay upper directory). The fault then lands on stopped processes.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moments import MARKER, popen_apply, start_watcher, stopped, wait_for_moment

from tests.apply.labhelpers import Lab, apply, events, fresh, of, on_host, packages, wait_for_ssh

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STACK: dict[str, Any] = {
    "driver": None,
    "cuda": {"toolkits": ["12.4"]},
    "cudnn": "9",
    "nccl": "2.21",
    "cuda_env": False,
    "smoke": [],
}


@pytest.fixture(scope="module")
def reference(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """lab-01 converged from fresh by a run nobody interrupted."""
    fresh(lab, "lab-01")
    inv = lab.inventory(tmp_path_factory.mktemp("ref"), **STACK)
    code, evs = apply(lab, inv, "-l", "lab-01")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    yield packages(inv, "lab-01")
    for host in ("lab-01", "lab-02"):  # fresh hosts for the tests that come after these
        fresh(lab, host)


def converge_and_compare(
    lab: Lab, inv: Path, host: str, reference: dict[str, Any], recovered: bool
) -> None:
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    titles = [c["title"] for c in of(evs, "change-started", host)]
    assert ("finish an interrupted dpkg run" in titles) == recovered, titles
    if recovered:
        assert titles[0] == "finish an interrupted dpkg run"
    assert on_host(inv, host, "sudo dpkg --audit").strip() == ""
    assert packages(inv, host) == reference
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0 and of(evs, "change-started") == []


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
    (finished,) = of(evs, "host-finished", host)
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
    (finished,) = of(events(out), "host-finished", host)
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
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert len(of(evs, "reboot-started", "lab-01")) == 1
    return end_state(inv, lab, "lab-01")


def kill_when(lab: Lab, inv: Path, host: str, at: str) -> list[dict[str, Any]]:
    """Run apply and SIGKILL it once the event `at` names begins; the events it wrote.

    The repository step is short (a download and a small package): its processes on the
    host are held (SIGSTOP) until the controller is killed, then killed as a closed
    session would leave them, so the kill lands inside it on any machine."""
    if at == "nvidia_repo":
        start_watcher(inv, host, "argv", "cuda-keyring")
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
            hit = (e["event"] == "change-started" and e["role"] == at) or (
                at == "reboot" and e["event"] == "reboot-started"
            )
            if hit:
                held = stopped(wait_for_moment(lab, host, proc)) if at == "nvidia_repo" else []
                time.sleep(0 if held else 0.3 if at != "reboot" else 0.5)
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
                if held:
                    pids = " ".join(map(str, held))
                    on_host(
                        inv, host, f"sudo kill -KILL {pids}; sudo rm -f /var/tmp/watch.py /{MARKER}"
                    )
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
        assert of(evs, "reboot-started", host) and not of(evs, "reboot-finished", host)
    else:
        started = of(evs, "change-started", host)
        assert started[-1]["role"] == at, started
        finished = [e["title"] for e in of(evs, "change-finished", host)]
        assert started[-1]["title"] not in finished, evs
    assert not of(evs, "recap")
    if at == "reboot":  # the reboot command went out before the kill: wait it through
        deadline = time.monotonic() + 60
        while lab.boot_id(host) == boot:
            assert time.monotonic() < deadline, "the host never rebooted"
            time.sleep(0.2)
    wait_for_ssh(lab, host)
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    if at == "reboot":  # the reboot it began happened: nothing is left to do
        assert of(evs, "change-started") == [] and of(evs, "reboot-started") == []
    assert on_host(inv, host, "sudo dpkg --audit").strip() == ""
    got = end_state(inv, lab, host)
    ref = driver_reference
    assert got["packages"] == ref["packages"]
    assert got["module"] == ref["module"] == "550.163.01"
    keys = set(got["tree"]) | set(ref["tree"])
    diff = sorted(k for k in keys if got["tree"].get(k) != ref["tree"].get(k))
    assert diff == [], " ".join(diff)
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0 and of(evs, "change-started") == []


# dpkg's states for a package a run left half-done (what `dpkg --audit` reports)
HALF_DONE = (
    "half-installed",
    "unpacked",
    "half-configured",
    "triggers-awaited",
    "triggers-pending",
)
STATES = "dpkg-query -W -f='${binary:Package} ${db:Status-Status}\\n'"


def half_done(inv: Path, host: str) -> dict[str, str]:
    """Every package of the host's dpkg database that is not in a settled state."""
    rows = (line.split(" ", 1) for line in on_host(inv, host, STATES).splitlines())
    return {name: state for name, state in rows if state in HALF_DONE}


def test_unpacked_with_a_dependency_missing_recovers(lab: Lab, tmp_path: Path) -> None:
    """As a disk that filled during dpkg's unpack leaves a host: a package unpacked, the
    package it depends on gone. The next apply finishes dpkg's run (dpkg --configure -a
    fails on the dependency; apt-get -f install brings it back, with the host's pins) and
    goes on with its plan; dpkg's database ends settled and the next plan is empty."""
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    converged = packages(inv, host)
    dev, lib = "libnccl-dev", "libnccl2"
    assert dev in converged and lib in converged, converged
    on_host(
        inv, host,
        f"cd /tmp && apt-get download {dev}={converged[dev][0]}"
        f" && sudo dpkg -r --force-depends --force-hold {lib}"
        f" && sudo dpkg --unpack /tmp/{dev}_*.deb",
    )  # fmt: skip
    assert half_done(inv, host) == {dev: "unpacked"}
    assert lib not in packages(inv, host)

    code, evs = apply(lab, inv, "-l", host)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    plan = of(evs, "plan-ready", host)[0]
    first = plan["changes"][0]
    assert first["task"] == "finish an interrupted dpkg run", plan["changes"]
    assert first["reason"] == f"dpkg was interrupted: {dev} unpacked", first
    titles = [c["title"] for c in of(evs, "change-finished", host) if c["status"] == "changed"]
    assert titles[0] == "finish an interrupted dpkg run", titles
    assert half_done(inv, host) == {}
    assert on_host(inv, host, "sudo dpkg --audit").strip() == ""
    assert packages(inv, host) == converged  # versions and holds as the stack has them
    code, evs = apply(lab, inv, "-l", host)
    assert code == 0 and of(evs, "change-started") == []


def broken_deb(tmp: Path) -> bytes:
    """A package that depends on one no repository has."""
    import subprocess

    root = tmp / "gpunode-test-broken"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: gpunode-test-broken\nVersion: 1.0\nArchitecture: all\n"
        "Maintainer: lab <lab@example.invalid>\nDepends: gpunode-test-nowhere (>= 1)\n"
        "Description: unpacked with a dependency no repository has\n"
    )
    out = tmp / "broken.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "--build", str(root), str(out)], check=True,
                   capture_output=True)  # fmt: skip
    return out.read_bytes()


def test_a_recovery_that_cannot_finish_names_each_package_and_what_to_run(
    lab: Lab, tmp_path: Path
) -> None:
    """The half-done package is held and its dependency is in no repository: apt-get -f
    install can neither bring the dependency nor remove the package. The host fails at
    that step, naming the package, its state and the commands; nothing else ran."""
    import base64

    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    deb = base64.b64encode(broken_deb(tmp_path)).decode()
    on_host(
        inv, host,
        f"echo {deb} | base64 -d > /tmp/broken.deb && sudo dpkg --unpack /tmp/broken.deb"
        " && sudo apt-mark hold gpunode-test-broken",
    )  # fmt: skip
    assert half_done(inv, host) == {"gpunode-test-broken": "unpacked"}
    before = packages(inv, host)
    code, evs = apply(lab, inv, "-l", host)
    assert code == 2
    (finished,) = of(evs, "host-finished", host)
    assert finished["status"] == "failed", finished
    assert [c["title"] for c in of(evs, "change-started", host)] == [
        "finish an interrupted dpkg run"
    ]
    message = finished["message"]
    assert (
        "finish an interrupted dpkg run: exit 1: dpkg --configure -a and apt-get -f install"
        " left these packages half-done: gpunode-test-broken unpacked;"
        " run on the host: sudo dpkg --configure -a && sudo apt-get -f install"
    ) in message, message
    # then why apt could not: the dependency, and its resolver's own line
    assert (
        " | gpunode-test-broken: Depends: gpunode-test-nowhere (>= 1) but it is not installable"
        " | E: Error, pkgProblemResolver::Resolve generated breaks, this may be caused by held"
        " packages."
    ) in message, message
    assert half_done(inv, host) == {"gpunode-test-broken": "unpacked"}
    assert packages(inv, host) == before
