"""`become: none` is honoured: a login user who is not root gets every change refused
before the first one (nothing half-done)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Lab, apply, of, on_host, wait_for_ssh

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_become_none_as_a_user_refuses_every_change_before_the_first(
    lab: Lab, tmp_path: Path
) -> None:
    assert lab.gpunode("lab", "reset", "lab-02").returncode == 0
    wait_for_ssh(lab, "lab-02")
    inv = lab.inventory(tmp_path, driver=None, cuda=None, cudnn=None, nccl=None, cuda_env=True,
                        smoke=[])  # fmt: skip
    inv.write_text(inv.read_text().replace("become: sudo", "become: none"))
    before = lab.tree("lab-02")
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 2
    (done,) = of(evs, "host-finished", "lab-02")
    assert done["status"] == "failed"
    assert "become: none, and ubuntu is not root: 2 change(s) need root" in done["message"]
    assert of(evs, "change-started") == []
    assert lab.tree("lab-02") == before  # nothing was written
    found = on_host(inv, "lab-02", "ls /etc/profile.d /etc/ld.so.conf.d")
    assert "gpunode" not in found
