"""Hosts that fail mid-run, through the CLI on lab hosts: a host that goes silent, a new
host key after a reboot, a reboot that never comes back, --max-fail per batch and a
stalled host among others. Every case asserts the exit code and the hosts' real state."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, events, of, on_host, start_lab
from tests.conftest import SLOT, slot_net

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NOTHING: dict[str, Any] = {"driver": None, "cuda": None, "cudnn": None, "nccl": None,
                           "cuda_env": False, "smoke": []}  # fmt: skip
PROFILE = "/etc/profile.d/gpunode-cuda.sh"


def inventory(
    lab: Lab, tmp: Path, ssh: dict[str, Any], files: dict[str, str], **stack: Any
) -> Path:
    """The lab's inventory with `defaults.ssh` and `defaults.stack` keys replaced, and the
    given roles (name: tasks.yaml text) in its own roles/ folder."""
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(lab.inventory_text)
    for key, value in ssh.items():
        doc["defaults"]["ssh"][key] = value
    for key, value in {**NOTHING, **stack}.items():
        doc["defaults"]["stack"][key] = value
    for name, text in files.items():
        (tmp / "roles" / name).mkdir(parents=True)
        (tmp / "roles" / name / "tasks.yaml").write_text(text)
    path = tmp / "inventory.yaml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def run(
    lab: Lab, inv: Path, *args: str, on: Callable[[dict[str, Any]], None] | None = None
) -> tuple[int, list[dict[str, Any]], float]:
    """apply --yes --json, calling `on` with each event as it arrives; (exit, events, secs)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpunode", "apply", str(inv), "--yes", "--json", *args],
        env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    evs: list[dict[str, Any]] = []
    try:
        for line in proc.stdout:
            if line.startswith("{"):
                evs.extend(events(line))
                if on is not None:
                    on(evs[-1])
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert evs and evs[-1]["event"] == "recap", err[-2000:]
    return proc.returncode, evs, time.monotonic() - start


def finished(evs: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {e["host"]: (e["status"], e["message"]) for e in of(evs, "host-finished")}


def fault(lab: Lab, host: str, knob: str, *, off: bool = False) -> None:
    res = lab.gpunode("lab", "fault", host, knob, *(["--off"] if off else []))
    assert res.returncode == 0, res.stderr


def wait_up(inv: Path, host: str, within: float = 60) -> None:
    """Poll until the host answers over SSH again (after a reboot or a fault)."""
    deadline = time.monotonic() + within
    while True:
        try:
            on_host(inv, host, "true")
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_host_silent_mid_command_is_unreachable_the_other_finishes(
    lab: Lab, tmp_path: Path
) -> None:
    # lab-01's step prints a line, then says nothing more (a hung host, a dead peer)
    quiet = (
        "- name: a step that goes quiet on lab-01\n"
        "  op: command\n"
        '  cmd: "[ $(hostname) = lab-01 ] || exec touch /var/tmp/quiet-done; echo started;'
        ' exec sleep 25"\n'
        "  creates: /var/tmp/quiet-done\n"  # made where it is done: lab-02 converges
    )
    inv = inventory(lab, tmp_path, {"inactivity_timeout": 3}, {"quiet": quiet},
                    cuda_env=True, roles=["quiet"])  # fmt: skip
    code, evs, secs = run(lab, inv)
    assert code == 3, finished(evs)
    done = finished(evs)
    assert done["lab-01"][0] == "unreachable" and "no output for 3 s" in done["lab-01"][1]
    assert done["lab-02"][0] == "changed", done
    assert secs < 25  # not the 1800 s command timeout, not even the step's own end
    for host in ("lab-01", "lab-02"):  # cuda_env came first: both wrote it
        assert "CUDA_HOME" in on_host(inv, host, f"cat {PROFILE}")


REBOOT_ROLE = "- name: reboot for the test\n  op: reboot\n  reason: the test asks for one\n"


def test_a_new_host_key_after_the_reboot_fails_at_once_exit_6(lab: Lab, tmp_path: Path) -> None:
    inv = inventory(lab, tmp_path, {}, {"again": REBOOT_ROLE}, roles=["again"])
    wait_up(inv, "lab-02")
    before = lab.boot_id("lab-02")
    key = lab.upper("lab-02") / "etc/ssh/ssh_host_ed25519_key"
    pub = key.with_name("ssh_host_ed25519_key.pub")
    fresh = tmp_path / "fresh"
    from gpunode_lab.rootfs import generate_host_key

    generate_host_key(fresh, "lab-02")

    def swap(e: dict[str, Any]) -> None:
        if e["event"] == "reboot-started":  # the host comes back with another key
            key.write_bytes((fresh / "ssh_host_ed25519_key").read_bytes())
            pub.write_bytes((fresh / "ssh_host_ed25519_key.pub").read_bytes())

    try:
        code, evs, secs = run(lab, inv, "-l", "lab-02", "--reboot-timeout", "120", on=swap)
    finally:
        assert lab.gpunode("lab", "reset", "lab-02").returncode == 0  # its own key again
    assert code == 6, finished(evs)
    status, message = finished(evs)["lab-02"]
    assert status == "unreachable" and "SHA256:" in message, message
    assert "changed" in message.lower() or "identification" in message.lower(), message
    assert secs < 40  # within seconds of the host coming back, not the 120 s reboot timeout
    recap = evs[-1]
    assert "hostkey-changed" in json.dumps(recap), recap
    wait_up(inv, "lab-02")
    assert lab.boot_id("lab-02") != before


def test_a_reboot_that_never_returns_ends_at_the_reboot_timeout(lab: Lab, tmp_path: Path) -> None:
    inv = inventory(lab, tmp_path, {}, {"again": REBOOT_ROLE}, roles=["again"])
    wait_up(inv, "lab-02")

    def refuse(e: dict[str, Any]) -> None:
        if e["event"] == "reboot-started":  # sshd will not come back after the reboot
            fault(lab, "lab-02", "refuse")

    try:
        code, evs, secs = run(lab, inv, "-l", "lab-02", "--reboot-timeout", "5", on=refuse)
    finally:
        fault(lab, "lab-02", "refuse", off=True)
    assert code == 2, finished(evs)
    status, message = finished(evs)["lab-02"]
    assert status == "failed" and "no new boot within 5 s" in message, message
    assert secs < 25
    assert of(evs, "reboot-finished") == []
    wait_up(inv, "lab-02")


def test_max_fail_counts_each_batch(lab: Lab, tmp_path: Path) -> None:
    assert lab.gpunode("lab", "reset", "lab-02").returncode == 0
    inv = inventory(lab, tmp_path, {}, {}, cuda_env=True)
    fault(lab, "lab-01", "refuse")
    try:
        # the first batch (lab-01) is 100% failed > 50%: the second never starts. Counted
        # over all hosts it would be 1 of 2, not more than 50%, and lab-02 would run.
        code, evs, _ = run(lab, inv, "--serial", "1", "--max-fail", "50")
    finally:
        fault(lab, "lab-01", "refuse", off=True)
    assert code == 3, finished(evs)
    assert {h: s for h, (s, _) in finished(evs).items()} == {
        "lab-01": "unreachable",
        "lab-02": "skipped",
    }
    assert not (lab.upper("lab-02") / PROFILE.lstrip("/")).exists()  # never started


@pytest.fixture(scope="module")
def lab10(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    args = ("--hosts", "10", "--ubuntu", "22.04", "--net", str(slot_net(240)),
            "--port", str(2240 + 1000 * SLOT))  # fmt: skip
    yield from start_lab(tmp_path_factory, *args)


def test_one_stalled_host_in_ten_costs_one_connect_timeout_not_the_sum(
    lab10: Lab, tmp_path: Path
) -> None:
    inv = inventory(lab10, tmp_path, {"connect_timeout": 4}, {}, cuda_env=True)
    fault(lab10, "lab-03", "stall")  # accepts TCP, never speaks
    try:
        code, evs, secs = run(lab10, inv)
    finally:
        fault(lab10, "lab-03", "stall", off=True)
    assert code == 3, finished(evs)
    done = finished(evs)
    status, message = done.pop("lab-03")
    assert status == "unreachable" and "no SSH banner within 4s" in message, message
    assert len(done) == 9 and {s for s, _ in done.values()} == {"changed"}, done
    assert secs < 4 + 20  # one connect timeout plus the others' work, all in parallel
    for host in done:
        assert (lab10.upper(host) / PROFILE.lstrip("/")).is_file(), host
    assert not (lab10.upper("lab-03") / PROFILE.lstrip("/")).exists()


def test_a_failed_change_is_not_replayed_once_the_inventory_drops_it(
    lab: Lab, tmp_path: Path
) -> None:
    """A command that fails (exit 3) ended: its journal entry goes with it, so a later
    inventory without the task converges instead of running the failing command again."""
    failing = "- name: a step that fails\n  op: command\n  cmd: exit 3\n  creates: /var/tmp/no\n"
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    inv = inventory(lab, tmp_path / "with", {}, {"failing": failing}, roles=["failing"])
    code, evs, _ = run(lab, inv, "-l", "lab-02")
    assert code == 2 and finished(evs)["lab-02"][0] == "failed", finished(evs)
    journal = "ls /var/lib/gpunode/journal 2>/dev/null || true"
    assert not on_host(inv, "lab-02", f"sudo sh -c {journal!r}").strip()
    without = inventory(lab, tmp_path / "without", {}, {})
    code, evs, _ = run(lab, without, "-l", "lab-02")
    assert code == 0, finished(evs)
    assert of(evs, "change-started") == []
