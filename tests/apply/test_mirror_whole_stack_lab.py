"""`gpunode mirror --whole-stack` on the lab: a converged host, whose own plan installs
nothing, gives a mirror holding the .debs a fresh host's plan asks for (driver, toolkit,
cuDNN, NCCL, at those versions, each file as the index has it), and a fresh host converges
from that mirror served on loopback."""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from gpunode.repoindex import parse_packages
from tests.apply.labhelpers import DPKG, Lab, apply, fresh, of, on_host, packages
from tests.apply.test_faults_repo import inventory, lab_repo
from tests.apply.test_mirror_lab import ASKED, serving

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STACK: dict[str, Any] = {
    "driver": {"branch": "550", "flavor": "open"},
    "cuda": {"toolkits": ["12.4"], "default": "12.4"},
    "cudnn": "9",
    "nccl": "2.21",
    "cuda_env": False,
    "smoke": [],
}
CONVERGED, NEW = "lab-01", "lab-02"
COMPONENTS = ("nvidia-open-550", "cuda-toolkit-12-4", "libcudnn9-cuda-12", "libnccl2")


def planned(lab: Lab, inv: Path, host: str) -> dict[str, str]:
    """name -> version (or glob) each apt-get of `host`'s plan asks for."""
    res = lab.gpunode("plan", str(inv), "--limit", host, "--json")
    commands = [
        c for ch in json.loads(res.stdout)["hosts"][host]["changes"] for c in ch["commands"]
    ]
    return {m[1]: m[2] for c in commands if "apt-get" in c for m in ASKED.finditer(c)}


def held_debs(folder: Path) -> dict[tuple[str, str], str]:
    """(name, version) -> the .deb's path, for each file of the folder's signed index
    that the folder holds with the index's SHA256."""
    index = parse_packages((folder / "Packages").read_text())
    out = {}
    for name in index.names():
        for pv in index.versions(name):
            path = folder / pv.filename
            if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == pv.sha256:
                out[(name, pv.version)] = str(path)
    return out


def test_a_converged_host_mirrors_a_fresh_hosts_stack(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, CONVERGED)
    fresh(lab, NEW)
    inv = lab.inventory(tmp_path, **STACK)
    code, evs = apply(lab, inv, "--limit", CONVERGED, "--no-smoke")
    assert code == 0, [e.get("message") for e in of(evs, "host-finished", CONVERGED)]
    assert planned(lab, inv, CONVERGED) == {}  # converged: its own plan asks apt for nothing
    want = planned(lab, inv, NEW)
    assert set(COMPONENTS) <= set(want), want

    out = tmp_path / "mirror"
    plain = lab.gpunode("mirror", str(inv), str(out / "plain"), "--limit", CONVERGED)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    folder = out / "plain" / "ubuntu2204" / "x86_64"
    assert {n for n, _ in held_debs(folder)} == {"cuda-keyring"}  # what issue #41 was about

    res = lab.gpunode("mirror", str(inv), str(out / "whole"), "--whole-stack", "--limit", CONVERGED)
    assert res.returncode == 0, res.stdout + res.stderr
    folder = out / "whole" / "ubuntu2204" / "x86_64"
    held = held_debs(folder)
    index = parse_packages((folder / "Packages").read_text())
    for name, version in want.items():
        if not index.versions(name):
            continue  # Ubuntu's archive's (the kernel headers): not NVIDIA's to mirror
        assert any(n == name and fnmatch.fnmatchcase(v, version) for n, v in held), (name, version)
    # the NVIDIA packages the converged host has are those files, at those versions
    have = packages(inv, CONVERGED)
    assert all((n, have[n][0]) in held for n in COMPONENTS), {n: have[n] for n in COMPONENTS}

    # a fresh host converges from it, its apt reading the mirror alone for NVIDIA's packages
    with serving(lab, out / "whole") as local:
        mirrored = inventory(lab, tmp_path / "mirrored", local, **STACK)
        code, evs = apply(lab, mirrored, "--limit", NEW, "--no-smoke")
        assert code == 0, [e.get("message") for e in of(evs, "host-finished", NEW)]
    got = packages(mirrored, NEW)
    assert {n: got[n][0] for n in COMPONENTS} == {n: have[n][0] for n in COMPONENTS}
    sources = on_host(mirrored, NEW, "cat /etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list")
    upstream, _ = lab_repo(lab)
    assert f"{local}/ubuntu2204/x86_64/" in sources and upstream not in sources, sources
    assert "iU" not in on_host(mirrored, NEW, DPKG)
