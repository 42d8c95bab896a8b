"""What runs as root on a lab host is what the inventory pinned: a swapped keyring package
is refused before apt sees it, and a file a local user plants in /tmp is never used."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO_ONLY = {"driver": None, "cuda": {"toolkits": ["12.4"]}, "cudnn": None, "nccl": None,
             "cuda_env": False, "smoke": []}  # fmt: skip
LEFTOVERS = "ls -d /tmp/gpunode.* /tmp/gpunode-* 2>/dev/null || true"


def test_a_keyring_that_is_not_the_pinned_one_is_never_installed(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, "lab-02")
    inv = lab.inventory(tmp_path, **REPO_ONLY)
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(inv.read_text())
    doc["defaults"]["repos"]["cuda_keyring_sha256"]["ubuntu2204"] = "0" * 64
    with inv.open("w") as fh:
        yaml.dump(doc, fh)
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 2
    (done,) = of(evs, "host-finished", "lab-02")
    assert "sha256 is not the pinned 0000" in done["message"]
    assert "cuda-keyring" not in packages(inv, "lab-02")
    assert on_host(inv, "lab-02", "ls /usr/share/keyrings/").find("cuda") == -1
    assert on_host(inv, "lab-02", LEFTOVERS).strip() == ""  # the private directory is gone


def test_a_file_planted_in_tmp_by_a_local_user_is_not_used(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, "lab-02")
    inv = lab.inventory(tmp_path, **REPO_ONLY)
    planted = "/tmp/gpunode-cuda-keyring_1.1-1.deb"  # where older releases downloaded it
    on_host(inv, "lab-02", f"echo planted > {planted} && chmod 666 {planted}")
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert packages(inv, "lab-02")["cuda-keyring"][0] == "1.1-1"
    assert on_host(inv, "lab-02", f"cat {planted}") == "planted\n"  # untouched, unused
    assert on_host(inv, "lab-02", "stat -c %U " + planted).strip() == "ubuntu"
    assert on_host(inv, "lab-02", LEFTOVERS).split() == [planted]
