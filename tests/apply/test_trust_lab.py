"""What runs as root on a lab host is what the inventory pinned: a swapped keyring package
is refused before apt sees it, and a file a local user plants in /tmp is never used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO_ONLY = {"driver": None, "cuda": {"toolkits": ["12.4"]}, "cudnn": None, "nccl": None,
             "cuda_env": False, "smoke": []}  # fmt: skip


def leftovers(lab: Lab, host: str) -> list[str]:
    """gpunode's temporary files and directories the host wrote in /tmp and kept: read from
    its own disk layer, so that what the machine running the lab has in its /tmp (seen
    through the lower layer) is not counted. Deleted entries are overlay whiteouts (0/0
    character devices) and are not counted either."""
    tmp = lab.upper(host) / "tmp"
    if not tmp.is_dir():
        return []
    return sorted(
        f"/tmp/{p.name}"
        for p in tmp.iterdir()
        if p.name.startswith(("gpunode.", "gpunode-"))
        and not (p.is_char_device() and os.stat(p, follow_symlinks=False).st_rdev == 0)
    )


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
    assert leftovers(lab, "lab-02") == []  # the private directory is gone


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
    assert leftovers(lab, "lab-02") == [planted]


def test_a_conda_a_user_planted_in_their_prefix_is_never_run(lab: Lab, tmp_path: Path) -> None:
    """A prefix under the login user's home: a `bin/conda` they planted would count as
    "conda installed" and run as root. The facts name the directory; planning refuses it."""
    fresh(lab, "lab-02")
    conda = {"prefix": "/home/ubuntu/conda", "channels": ["conda-forge"],
             "envs": {"t": {"python": "3.11"}}}  # fmt: skip
    inv = lab.inventory(tmp_path, **{**REPO_ONLY, "cuda": None, "conda": conda})
    marker = "/home/ubuntu/planted-conda-ran"
    on_host(inv, "lab-02", "mkdir -p /home/ubuntu/conda/bin /home/ubuntu/conda/conda-meta"
            f" && printf '#!/bin/sh\\nid >> {marker}\\n' > /home/ubuntu/conda/bin/conda"
            " && chmod 755 /home/ubuntu/conda/bin/conda")  # fmt: skip
    plan = lab.gpunode("plan", str(inv), "--limit", "lab-02")
    said = plan.stdout + plan.stderr
    assert plan.returncode == 4 and "/home/ubuntu/conda is not root's alone" in said, said
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code != 0
    (done,) = of(evs, "host-finished", "lab-02")
    assert "conda prefix /home/ubuntu/conda: /home/ubuntu/conda is not root's" in done["message"]
    assert (
        on_host(inv, "lab-02", f"ls {marker} 2>&1 || true")
        .strip()
        .endswith("No such file or directory")
    )
    assert on_host(inv, "lab-02", "id -u").strip() != "0"  # the user, not root, planted it
