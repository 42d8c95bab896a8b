"""The real `gpunode top` in a real terminal (tmux), read back with capture-pane.

The hosts are `connection: local` with an nvidia-smi stand-in first on PATH that prints
lines shaped like the H200 captures; the transport, sampler and app are all real.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tui.tmux import Tmux, host_line, start_gpunode

FAKE_DIR = Path(__file__).parent.parent / "fixtures" / "monitor"
HOSTS = ("local-a", "local-b")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


@pytest.fixture
def top(tmp_path: Path) -> Iterator[tuple[Tmux, Path]]:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "defaults: {connection: local, become: none}\nhosts:\n  local-a: {}\n  local-b: {}\n"
    )
    down = tmp_path / "down"
    env = {
        "PATH": f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SMI_DOWN": str(down),
        "FAKE_SMI_GPUS": "4",
    }
    t = start_gpunode(["top", str(inv), "--interval", "0.5"], env)
    try:
        yield t, down
    finally:
        t.kill()


def test_top_shows_live_gpus_survives_a_drop_and_quits(top: tuple[Tmux, Path]) -> None:
    t, down = top

    def ready(s: str) -> bool:
        # live, and laid out: the first frame Textual paints can carry the columns fitted
        # before the terminal's size was known (host and state only) when the stand-in's
        # first sample beat the first layout, as on a loaded machine; the Resize that follows
        # fits the rest
        return all("live" in host_line(s, h) and "4x H200" in host_line(s, h) for h in HOSTS)

    s = t.wait(ready)
    assert "gpunode top · inv" in s and "inv  2 hosts (2 live), 8 GPUs" in s
    assert "580.159.04" in host_line(s, "local-a")
    line = host_line(s, "local-a")
    assert "/561.6" in line  # 4 x 143771 MiB, in GiB
    first = line
    # The stand-in's utilisation moves every tick: the view must move too.
    t.wait(lambda s: host_line(s, "local-a") != first and "live" in host_line(s, "local-a"))

    down.touch()  # every nvidia-smi now fails like a lost GPU
    s = t.wait(lambda s: "stale" in host_line(s, "local-a"), timeout=30)
    assert "/561.6" in host_line(s, "local-a")  # last values kept, marked stale
    down.unlink()
    t.wait(lambda s: "live" in host_line(s, "local-a"), timeout=40)

    t.keys("o")  # one host's GPUs
    s = t.wait(lambda s: "SM MHz" in s and "H200" in s)
    assert sum(1 for ln in s.splitlines() if " H200 " in ln) == 4
    t.keys("q")
    assert t.exit_code() == 0
