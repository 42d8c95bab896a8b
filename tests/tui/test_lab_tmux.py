"""`gpunode top` and `gpunode apply` in a real terminal (tmux) against `gpunode lab` hosts.

Real sshd, sudo, apt and dpkg in every host; only the GPUs are simulated. The screen is
read with capture-pane; what the screen claims is checked against the hosts themselves.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

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
    """The driver from the lab's repository, loaded by a reboot: nvidia-smi answers after."""
    if lab.run(host, "nvidia-smi -L", check=False).returncode == 0:
        return
    base = lab.config["repo_url"]
    lab.run(host, f"wget -q -O /tmp/k.deb {base}/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb")
    lab.sudo(
        host,
        "export DEBIAN_FRONTEND=noninteractive; dpkg -i /tmp/k.deb >/dev/null"
        " && apt-get update -q >/dev/null && apt-get install -y -q nvidia-open-580 >/dev/null",
    )
    lab.run(host, "sudo reboot", check=False)
    time.sleep(0.5)
    lab.wait_up(host, timeout=60)
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

    s = t.wait(all_live, timeout=60)
    assert "3 hosts (3 live), 6 GPUs" in s
    first = {h: values(host_line(s, h), 2) for h in hosts}
    for h in hosts:
        gpus, util, mem = first[h][:3]
        assert gpus == "2" and mem.endswith("/280.8"), host_line(s, h)  # 2 x 143771 MiB
        assert float(util) > 50, host_line(s, h)  # the busy load, as nvidia-smi reports it
    # Every host's numbers move between two screens.
    t.wait(lambda s: all(values(host_line(s, h), 2) != first[h] for h in hosts), timeout=20)

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
    t.wait(lambda s: "Lab overview" in s)

    # lab-02 drops: sshd stops taking connections and its running session is cut.
    down = hosts[1]
    tui_lab.fault(down, "refuse")
    tui_lab.fault(down, "drop", "0")
    s = t.wait(lambda s: "stale" in host_line(s, down), timeout=30)
    frozen = values(host_line(s, down), 2)
    others = {h: values(host_line(s, h), 2) for h in hosts if h != down}
    assert float(frozen[1]) > 50 and frozen[2].endswith("/280.8")  # its last values, kept
    assert "(2 live)" in s
    s = t.wait(
        lambda s: all(values(host_line(s, h), 2) != v for h, v in others.items()), timeout=20
    )
    assert values(host_line(s, down), 2) == frozen and "stale" in host_line(s, down)
    assert all(host_line(s, h).rstrip().endswith("live (nvidia-smi)") for h in others)
    assert re.search(r"stale \d+s ago · retry in \d+s", host_line(s, down))  # with backoff

    tui_lab.fault(down, "drop", off=True)
    tui_lab.fault(down, "refuse", off=True)
    s = t.wait(all_live, timeout=60)  # back within the backoff's wait
    assert "3 hosts (3 live), 6 GPUs" in s
    back = values(host_line(s, down), 2)
    t.wait(lambda s: values(host_line(s, down), 2) != back, timeout=20)

    t.keys("q")
    assert t.exit_code() == 0
