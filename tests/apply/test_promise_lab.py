"""The plan is a promise, on a lab host whose NVIDIA mirror was caught mid-sync (its index
lists the newest 570 release's metapackage and driver package, not the DKMS package they
depend on at exactly that release): what apt would refuse is refused before anything on
the host changes, by the controller's index check or, when the controller cannot read the
index, by apt's own resolver on the host (`apt-get -s`). The host's dpkg database, holds,
/etc and the before_disrupt hook's marker are compared with what they were."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages, start_lab
from tests.conftest import SLOT, slot_net

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-01"
MARKER = "/var/lib/gpunode-test-drained"
NO_STACK: dict[str, Any] = {
    "driver": {"branch": "570", "update": "latest"},
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "cuda_env": False,
    "smoke": [],
}
# what gpunode's change would have touched first: preferences, holds, hooks, packages
WATCHED = ("etc/", "var/lib/dpkg/status", "var/lib/gpunode/")


@pytest.fixture(scope="module")
def midsync(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    args = ("--hosts", "1", "--ubuntu", "22.04", "--mirror", "mid-sync",
            "--net", str(slot_net(236)), "--port", str(2236 + 1000 * SLOT))  # fmt: skip
    yield from start_lab(tmp_path_factory, *args)


def inventory(lab: Lab, tmp: Path) -> Path:
    from ruamel.yaml import YAML

    path = lab.inventory(tmp, **NO_STACK)
    yaml = YAML()
    doc = yaml.load(path.read_text())
    doc["defaults"]["hooks"] = {"before_disrupt": f"touch {MARKER}"}
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def watched(lab: Lab, host: str = HOST) -> dict[str, str]:
    """What gpunode's change would touch; the run's host lock aside (it takes one)."""
    tree = lab.tree(host).items()
    return {k: v for k, v in tree if k.startswith(WATCHED) and "gpunode/locks/" not in k}


OLDER_570 = ("nvidia-open-570=570.133.20-1", "libnvidia-compute-570=570.133.20-0ubuntu1")


@pytest.fixture(scope="module")
def at_570(midsync: Lab) -> Lab:
    """570.133.20 installed (and loaded) by hand, as an admin would have it."""
    out = midsync.gpunode(
        "lab", "install", HOST, "nvidia-open-570=570.133.20-1",
        "libnvidia-compute-570=570.133.20-0ubuntu1", "--reboot",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return midsync


def test_plan_refuses_what_the_mirror_lacks_and_apply_touches_nothing(
    at_570: Lab, tmp_path: Path
) -> None:
    lab = at_570
    inv = inventory(lab, tmp_path)
    before = watched(lab)
    plan = lab.gpunode("plan", str(inv))
    assert plan.returncode == 4, plan.stdout + plan.stderr
    assert "nvidia-dkms-570-open (= 570.195.03-0ubuntu1)" in plan.stdout
    assert "it has 570.133.20-0ubuntu1" in plan.stdout
    code, evs = apply(lab, inv)
    assert code == 4
    assert of(evs, "change-started") == [] and of(evs, "hook-finished") == []
    assert watched(lab) == before
    assert packages(inv, HOST)["nvidia-open-570"][0] == "570.133.20-1"


def test_the_hosts_apt_refuses_it_when_the_controller_cannot_read_the_index(
    at_570: Lab, tmp_path: Path
) -> None:
    """The controller's proxy refuses: versions come from the host's apt-cache madison,
    which has no dependencies; apt-get -s on the host, with the driver's preferences as
    the plan would write them, names the missing package before anything changes."""
    lab = at_570
    inv = inventory(lab, tmp_path)
    env = {**lab.env, "http_proxy": "http://127.0.0.1:9", "GPUNODE_CACHE_DIR": str(tmp_path)}
    before = watched(lab)
    plan = lab.gpunode("plan", str(inv), env=env)
    assert plan.returncode == 4, plan.stdout + plan.stderr
    assert "apt's resolver refuses the plan" in plan.stdout
    assert "Depends: nvidia-dkms-570-open (= 570.195.03-0ubuntu1)" in plan.stdout
    res = lab.gpunode("apply", str(inv), "--yes", "--json", env=env)
    assert res.returncode == 4, res.stdout[-2000:] + res.stderr[-2000:]
    (finished,) = [e for e in res.stdout.splitlines() if '"host-finished"' in e]
    assert "nvidia-dkms-570-open" in finished and "nothing was changed" in finished
    assert '"change-started"' not in res.stdout
    assert watched(lab) == before
    assert not on_host(inv, HOST, f"ls {MARKER} 2>/dev/null || true").strip()
    pref = on_host(inv, HOST, "ls /etc/apt/preferences.d/")
    assert "gpunode-nvidia-driver" not in pref


def test_580_to_590_applies_what_plan_accepted_and_converges(midsync: Lab, tmp_path: Path) -> None:
    """From 590 on the packages are unversioned and nvidia-driver-pinning-590 (versioned
    by branch, 590-1) keeps the branch: plan accepts the switch, apply makes it, with one
    reboot, and the next plan is empty."""
    lab = midsync
    assert lab.gpunode("lab", "reset", HOST).returncode == 0
    out = lab.gpunode("lab", "install", HOST, "nvidia-open-580=580.95.05-1",
                      "libnvidia-compute-580=580.95.05-0ubuntu1", "--reboot")  # fmt: skip
    assert out.returncode == 0, out.stderr
    inv = lab.inventory(tmp_path, **{**NO_STACK, "driver": {"branch": "590"}})
    plan = lab.gpunode("plan", str(inv))
    assert plan.returncode == 0, plan.stdout + plan.stderr
    code, evs = apply(lab, inv)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    pk = packages(inv, HOST)
    assert pk["nvidia-driver-pinning-590"][0] == "590-1"
    assert pk["nvidia-open"][0].startswith("590.44.01-")
    assert "nvidia-open-580" not in pk or not pk["nvidia-open-580"][0]
    assert on_host(inv, HOST, "cat /sys/module/nvidia/version").strip() == "590.44.01"
    code, evs = apply(lab, inv)
    assert code == 0 and of(evs, "change-started") == []


def test_what_apt_would_refuse_at_apply_plan_refuses_too(lab: Lab, tmp_path: Path) -> None:
    """570 installed by hand (every package marked manual, none held), 580.95.05 pinned:
    apt cannot switch branches while the 570 packages stay (their DKMS packages conflict).
    Found by the agreement property (plan said 0, apply failed); plan now refuses with
    apt's own lines, and apply refuses alike, touching nothing."""
    fresh(lab, "lab-02")  # the full repository
    out = lab.gpunode("lab", "install", "lab-02", *OLDER_570, "--reboot")
    assert out.returncode == 0, out.stderr
    inv = lab.inventory(tmp_path, **{**NO_STACK, "driver": {"version": "580.95.05", "hold": False}})
    before = watched(lab, "lab-02")
    plan = lab.gpunode("plan", str(inv), "--limit", "lab-02")
    assert plan.returncode == 4, plan.stdout + plan.stderr
    assert "Conflicts: nvidia-dkms-580-open" in plan.stdout, plan.stdout
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 4 and of(evs, "change-started") == []
    assert watched(lab, "lab-02") == before
