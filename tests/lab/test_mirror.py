"""`gpunode lab up --mirror lagging`: the hosts' apt sees a repository without the newest."""

from __future__ import annotations

import json

import pytest

from tests.conftest import gpunode_lab, lab_unavailable, slot_net, slot_path

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STATE = slot_path("/var/lib/gpunode-lab-test-mirror")
NET = slot_net(3)  # its own addresses, beside the session's lab and the lifecycle tests'


@pytest.fixture
def lagging_lab():
    reason = lab_unavailable()
    if reason:
        pytest.skip(reason)
    gpunode_lab(STATE, "down", check=False)
    gpunode_lab(STATE, "up", "--hosts", "1", "--net", str(NET), "--mirror", "lagging")
    yield STATE
    gpunode_lab(STATE, "down", check=False)


def test_lagging_mirror_serves_older_releases_only(lagging_lab):
    doc = json.loads(gpunode_lab(lagging_lab, "status", "--json").stdout)
    assert doc["config"]["mirror"] == "lagging"
    assert "(lagging mirror)" in gpunode_lab(lagging_lab, "status").stdout
    out = gpunode_lab(lagging_lab, "install", "lab-01", "nvidia-open-550=550.127.05-1")
    assert "nvidia-open-550=550.127.05-1" in out.stdout
    bad = gpunode_lab(lagging_lab, "install", "lab-01", "nvidia-open-550=550.163.01-1", check=False)
    assert (
        bad.returncode == 1 and "'550.163.01-1' for 'nvidia-open-550' was not found" in bad.stderr
    )
    bad = gpunode_lab(lagging_lab, "install", "lab-01", "libnccl2=2.26.5-1+cuda12.9", check=False)
    assert bad.returncode == 1 and "was not found" in bad.stderr
    # a `full` lab is another shape: `up` replaces the lagging one
    out = gpunode_lab(lagging_lab, "up", "--hosts", "1", "--net", str(NET))
    assert "another shape" in out.stderr
    doc = json.loads(gpunode_lab(lagging_lab, "status", "--json").stdout)
    assert doc["config"]["mirror"] == "full"
