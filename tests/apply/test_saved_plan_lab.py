"""`plan --out FILE` and `apply FILE`: a saved plan is applied exactly, or not at all on a
host whose plan is no longer the saved one (it changed since, or the plan was applied
already), and not once its inventory changed. Checked on a lab host's files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.apply.labhelpers import Lab, fresh, of, on_host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
PROFILE = "/etc/profile.d/gpunode-cuda.sh"
LDCONF = "/etc/ld.so.conf.d/gpunode-cuda.conf"
STACK = {"driver": None, "cuda": None, "cudnn": None, "nccl": None, "cuda_env": True,
         "smoke": []}  # fmt: skip


def events(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_a_saved_plan_applies_exactly_once_and_only_as_saved(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **STACK)
    saved = tmp_path / "plan.json"
    out = lab.gpunode("plan", str(inv), "--limit", HOST, "--out", str(saved))
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
    assert "gpunode apply" in out.stderr
    # the selection travels with the file: another one is refused
    again = lab.gpunode("apply", str(saved), "--limit", "lab-01")
    assert again.returncode == 5 and "carries its own --limit" in again.stderr

    res = lab.gpunode("apply", str(saved), "--json")  # no prompt: it was reviewed
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    evs = events(res.stdout)
    assert {e["host"] for e in of(evs, "change-started")} == {HOST}  # lab-01: not selected
    assert "CUDA_HOME" in on_host(inv, HOST, f"cat {PROFILE}")

    # applied once: the host no longer plans what was saved, so a second apply does nothing
    before = lab.tree(HOST)
    res = lab.gpunode("apply", str(saved), "--json")
    assert res.returncode == 4, res.stdout[-2000:]
    assert "no longer the one saved in" in res.stdout and "no longer needed" in res.stdout
    assert of(events(res.stdout), "change-started") == []
    assert lab.tree(HOST) == before


def test_a_host_changed_since_is_stopped_and_an_edited_inventory_refused(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path, **STACK)
    saved = tmp_path / "plan.json"
    assert lab.gpunode("plan", str(inv), "-l", HOST, "--out", str(saved)).returncode == 0
    # someone writes the profile by hand (other content): the plan is the same, the host not
    on_host(inv, HOST, f"echo '# by hand' | sudo tee {LDCONF} >/dev/null")
    res = lab.gpunode("apply", str(saved), "--json")
    assert res.returncode == 0, res.stdout[-2000:]  # the same changes: applied
    assert "CUDA_HOME" in on_host(inv, HOST, f"cat {PROFILE}")
    assert "by hand" not in on_host(inv, HOST, f"cat {LDCONF}")

    fresh(lab, HOST)
    assert lab.gpunode("plan", str(inv), "-l", HOST, "--out", str(saved)).returncode == 0
    on_host(inv, HOST, f"echo 'export X=1' | sudo tee {PROFILE} >/dev/null")
    text = inv.read_text()
    inv.write_text(text + "\n# an edit after the plan was saved\n")
    res = lab.gpunode("apply", str(saved))
    assert res.returncode == 4
    assert "changed since this plan was saved: plan again" in res.stderr
    assert "CUDA_HOME" not in on_host(inv, HOST, f"cat {PROFILE}")
