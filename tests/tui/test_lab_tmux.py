"""`gpunode top` and `gpunode apply` in a real terminal (tmux) against `gpunode lab` hosts.

Real sshd, sudo, apt and dpkg in every host; only the GPUs are simulated. The screen is
read with capture-pane; what the screen claims is checked against the hosts themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import Lab
from tests.tui.tmux import Tmux, host_line, start_gpunode

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]

NUMBER = re.compile(r"[\d.]+(?:/[\d.]+)?|-")
DPKG = "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'"
FINAL = ("ok", "changed", "failed", "unreachable")


# an overview row: mark, host, GPUs ("2x H200"), driver, then its numbers
ROW_SKIP = 5


def values(line: str, skip: int) -> list[str]:
    """The numbers of a table row after its first `skip` words, up to the state text."""
    out = []
    for word in line.split()[skip:]:
        if NUMBER.fullmatch(word):
            out.append(word)
        elif word[0].isalpha():
            break
    return out


def gpu_lines(screen: str) -> list[str]:
    """The GPU rows of the one-host view: mark, index, model."""
    return [
        ln
        for ln in screen.splitlines()
        if len(p := ln.split()) > 3 and len(p[0]) == 1 and p[1].isdigit() and p[2] == "H200"
    ]


def install_driver(lab: Lab, host: str) -> None:
    """The driver from the lab's repository, built by DKMS against the running kernel's
    headers and loaded by a reboot: nvidia-smi answers after."""
    if lab.run(host, "nvidia-smi -L", check=False).returncode == 0:
        return
    base = lab.config["repo_url"]
    lab.run(host, f"wget -q -O /tmp/k.deb {base}/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb")
    lab.sudo(
        host,
        "export DEBIAN_FRONTEND=noninteractive; dpkg -i /tmp/k.deb >/dev/null"
        " && apt-get update -q >/dev/null && apt-get install -y -q nvidia-open-580"
        ' "linux-headers-$(uname -r)" >/dev/null',  # DKMS builds the module against them
    )
    lab.reboot_inside(host)
    assert len(lab.run(host, "nvidia-smi -L").stdout.splitlines()) == 2


@pytest.fixture
def top(tui_lab: Lab) -> Iterator[Tmux]:
    with ThreadPoolExecutor(len(tui_lab.names)) as pool:
        list(pool.map(lambda h: install_driver(tui_lab, h), tui_lab.names))
    for host in tui_lab.names:  # GPUs at work: every value moves, none sits at zero
        tui_lab.fault(host, "load", "busy")
    t = start_gpunode(["top", str(tui_lab.inventory_path), "--interval", "0.5"], {})
    try:
        yield t
    finally:
        t.kill()
        for host in tui_lab.names:
            tui_lab.fault(host, "drop", off=True)
            tui_lab.fault(host, "refuse", off=True)


def test_top_shows_every_lab_gpu_moving_survives_a_dropped_host_and_quits(
    tui_lab: Lab, top: Tmux
) -> None:
    t, hosts = top, tui_lab.names
    assert len(hosts) == 3

    def all_live(s: str) -> bool:
        return all(host_line(s, h).rstrip().endswith("live (nvidia-smi)") for h in hosts)

    def laid_out(s: str) -> bool:
        # the first frame painted may carry the columns fitted before the terminal's size was
        # known (host and state only): wait for the GPUs column too (test_top_tmux.py)
        return all_live(s) and all(" 2x H200 " in host_line(s, h) for h in hosts)

    s = t.wait(laid_out, timeout=60)
    assert "3 hosts (3 live), 6 GPUs" in s
    first = {h: values(host_line(s, h), ROW_SKIP) for h in hosts}
    for h in hosts:
        util, mem = first[h][:2]
        # each host's GPUs by model, and the driver the lab's repository installed
        assert re.search(r" 2x H200 +\d+\.\d+\.\d+ ", host_line(s, h)), host_line(s, h)
        assert mem.endswith("/280.8"), host_line(s, h)  # 2 x 143771 MiB
        assert float(util) > 50, host_line(s, h)  # the busy load, as nvidia-smi reports it
    # Every host's numbers move between two screens.
    t.wait(lambda s: all(values(host_line(s, h), ROW_SKIP) != first[h] for h in hosts), timeout=20)

    # One host at a time: both of its GPUs are there and each one's numbers move.
    t.keys("o")
    for h in hosts:
        s = t.wait(lambda s, h=h: f" {h}  ● live" in s and len(gpu_lines(s)) == 2)
        assert [ln.split()[1] for ln in gpu_lines(s)] == ["0", "1"]  # GPU indexes
        before = [values(ln, 3) for ln in gpu_lines(s)]  # util, mem, mem%, °C, power, SM
        assert all(len(b) == 6 and b[1].endswith("/140.4") for b in before), s
        t.wait(
            lambda s, before=before: (
                len(rows := [values(ln, 3) for ln in gpu_lines(s)]) == 2
                and all(r != b for r, b in zip(rows, before, strict=True))
            )
        )
        t.keys("n")
    t.keys("o")
    t.wait(lambda s: "inventory  " in s and "o: one host" in s)  # the overview, named

    # lab-02 drops: sshd stops taking connections and its running session is cut.
    down = hosts[1]
    tui_lab.fault(down, "refuse")
    tui_lab.fault(down, "drop", "0")
    s = t.wait(lambda s: "stale" in host_line(s, down), timeout=30)
    frozen = values(host_line(s, down), ROW_SKIP)
    others = {h: values(host_line(s, h), ROW_SKIP) for h in hosts if h != down}
    assert float(frozen[0]) > 50 and frozen[1].endswith("/280.8")  # its last values, kept
    assert "(2 live)" in s
    s = t.wait(
        lambda s: all(values(host_line(s, h), ROW_SKIP) != v for h, v in others.items()), timeout=20
    )
    assert values(host_line(s, down), ROW_SKIP) == frozen and "stale" in host_line(s, down)
    assert all(host_line(s, h).rstrip().endswith("live (nvidia-smi)") for h in others)
    assert re.search(r"stale \d+s ago · retry in \d+s", host_line(s, down))  # with backoff

    tui_lab.fault(down, "drop", off=True)
    tui_lab.fault(down, "refuse", off=True)
    s = t.wait(all_live, timeout=60)  # back within the backoff's wait
    assert "3 hosts (3 live), 6 GPUs" in s
    back = values(host_line(s, down), ROW_SKIP)
    t.wait(lambda s: values(host_line(s, down), ROW_SKIP) != back, timeout=20)

    t.keys("q")
    assert t.exit_code() == 0


ROW = re.compile(r"^\s*\S\s+(lab-\d\d)\s+([a-z]+)\b(.*)$")
RECAP_ROW = re.compile(r"(lab-\d\d)\s+([a-z]+)\s+ok=(\d+)\s+changed=(\d+)\s+failed=(\d+)")
PROGRESS = re.compile(r"\s(\d+)/(\d+)\s")


def packages(lab: Lab, host: str) -> dict[str, tuple[str, str]]:
    """name -> (version, dpkg status) for every package dpkg knows of in the host."""
    out = {}
    for line in lab.run(host, DPKG).stdout.splitlines():
        name, version, status = line.split(" ", 2)
        out[name] = (version, status.strip())
    return out


def test_apply_shows_hosts_advancing_live_with_a_reboot_and_a_true_recap(
    tui_lab: Lab, tmp_path: Path
) -> None:
    hosts = tui_lab.names
    for h in hosts:  # from nothing: no driver, no repository, never rebooted by gpunode
        tui_lab.reset(h)
        assert "nvidia-open-580" not in packages(tui_lab, h)
    boots = {h: tui_lab.status()[h]["boots"] for h in hosts}
    env = {"GPUNODE_STATE_DIR": str(tmp_path / "state")}
    t = start_gpunode(["apply", str(tui_lab.inventory_path), "--yes"], env, size=(160, 45))
    seen: dict[str, list[str]] = {h: [] for h in hosts}  # each host's statuses, in order
    done: dict[str, list[int]] = {h: [] for h in hosts}  # its finished changes, as shown
    reboot_shown: set[str] = set()  # hosts whose step read "reboot: <why>"
    try:
        deadline = time.monotonic() + 400
        screen = ""
        while "Recap" not in screen:
            assert time.monotonic() < deadline, f"no recap; last screen:\n{screen}"
            screen = t.screen()
            for line in screen.splitlines():
                m = ROW.match(line)
                if not m or "ok=" in line:
                    continue
                host, status, rest = m.groups()
                if not seen[host] or seen[host][-1] != status:
                    seen[host].append(status)
                if status == "rebooting" and "reboot: " in rest:
                    reboot_shown.add(host)
                if p := PROGRESS.search(rest):
                    done[host].append(int(p.group(1)))
            time.sleep(0.25)
        screen = t.wait(lambda s: {m.group(1) for m in RECAP_ROW.finditer(s)} == set(hosts))
        recap = {m.group(1): m.groups()[1:] for m in RECAP_ROW.finditer(screen)}
        assert re.search(r"Recap\s+exit 0\b", screen), screen

        for h in hosts:
            order = seen[h]
            # Live: the row went through the run's stages, in this order, before the end.
            assert "applying" in order and "rebooting" in order, (h, order)
            assert order.index("applying") < order.index("rebooting") < len(order) - 1, order
            assert order[-1] == "changed", (h, order)
            assert h in reboot_shown
            assert done[h] == sorted(done[h]) and len(set(done[h])) >= 3, (h, done[h])
            assert recap[h][0] == "changed" and recap[h][3] == "0", (h, recap[h])
            assert int(recap[h][2]) > 0
            row = next(ln for ln in screen.splitlines() if (m := ROW.match(ln)) and m[1] == h)
            p = PROGRESS.search(row)
            assert p and p[1] == p[2] and int(p[1]) >= int(recap[h][2]), row  # a full bar

            # The recap is the hosts' real state: packages in dpkg, driver loaded after a reboot.
            pk = packages(tui_lab, h)
            version, status = pk["nvidia-open-580"]
            assert version.startswith("580.") and status == "hi", (version, status)  # held
            assert pk["cuda-toolkit-13-0"][1] == "ii"
            loaded = tui_lab.run(h, "cat /sys/module/nvidia/version").stdout.strip()
            assert version.startswith(loaded + "-"), (version, loaded)
            assert tui_lab.status()[h]["boots"] > boots[h]

        t.keys("q")  # the run is over: no question, the run's own exit status
        assert t.exit_code(timeout=30) == 0
    finally:
        t.kill()
    plan = subprocess.run(
        [sys.executable, "-m", "gpunode", "plan", str(tui_lab.inventory_path),
         "--detailed-exitcode"],
        capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )  # fmt: skip
    assert plan.returncode == 0, plan.stdout + plan.stderr  # nothing left to do
