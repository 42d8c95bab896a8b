"""The framework stack of a conda env on lab hosts: torch with torchvision and torchaudio from
one wheel variant, the env's other packages, and Anaconda's Terms of Service (the lab's
conda, like conda >= 25.5, refuses the default channels until they are accepted)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gpunode import compat
from tests.apply.labhelpers import Lab, apply, fresh, of, on_host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

BARE = {"driver": None, "cuda": None, "cudnn": None, "nccl": None, "cuda_env": False, "smoke": []}
TORCH = {
    "python": "3.11",
    "pytorch": "2.7.1",
    "torchvision": True,
    "torchaudio": True,
    "packages": {"numpy": "2.2.6", "einops": "0.8.1"},
}


def freeze(inv: Path, host: str, env: str) -> set[str]:
    out = on_host(inv, host, f"/opt/conda/envs/{env}/bin/python -m pip list --format=freeze")
    return set(out.split())


def test_default_channels_without_a_choice_are_refused_and_nothing_is_written(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, "lab-01")
    conda = {"prefix": "/opt/conda", "envs": {"torch": TORCH}}
    inv = lab.inventory(tmp_path, **BARE, conda=conda)
    before = lab.tree("lab-01")
    res = lab.gpunode("plan", str(inv), "--limit", "lab-01")
    assert res.returncode == 4, res.stdout + res.stderr
    assert "conda.tos: accept" in res.stdout and "conda.channels: [conda-forge]" in res.stdout
    code, evs = apply(lab, inv, "--limit", "lab-01")
    assert code == 4 and of(evs, "change-started") == []
    assert lab.tree("lab-01") == before


def test_torch_with_its_companions_and_packages_after_accepting_the_tos(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, "lab-02")
    conda = {"prefix": "/opt/conda", "tos": "accept", "envs": {"torch": TORCH}}
    inv = lab.inventory(tmp_path, **BARE, conda=conda)
    before = lab.tree("lab-02")
    res = lab.gpunode("plan", str(inv), "--limit", "lab-02")
    assert res.returncode == 0, res.stdout + res.stderr
    assert (
        "accept Anaconda's Terms of Service for channels https://repo.anaconda.com/pkgs/main"
        in (res.stdout)
    )
    assert lab.tree("lab-02") == before, "plan wrote to the host"

    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    # the acceptance, recorded where `conda tos accept --system` writes it
    each = "for f in /opt/conda/conda-meta/tos/*/*.json; do cat $f; echo; done"
    records = on_host(inv, "lab-02", each).splitlines()
    accepted = {json.loads(r)["base_url"] for r in records if json.loads(r)["tos_accepted"]}
    assert accepted == {"https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r"}
    # torch and its companions from one wheel variant, the other packages from PyPI
    variant = compat.torch_variant("2.7.1", None, None)
    assert variant == "cu128"
    assert {
        "torch==2.7.1+cu128",
        "torchvision==0.22.1+cu128",
        "torchaudio==2.7.1+cu128",
        "numpy==2.2.6",
        "einops==0.8.1",
    } <= freeze(inv, "lab-02", "torch")
    meta = on_host(inv, "lab-02", "cat /opt/conda/envs/torch/conda-meta/python-*.json")
    assert json.loads(meta)["version"] == "3.11.0"

    # the env exported as installed, in the JSON envelope and in plain text
    res = lab.gpunode("envs", str(inv), "--limit", "lab-02", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["kind"] == "envs" and doc["hosts"]["lab-02"]["status"] == "ok"
    (torch,) = [e for e in doc["hosts"]["lab-02"]["envs"] if e["name"] == "torch"]
    assert torch["path"] == "/opt/conda/envs/torch" and torch["error"] is None
    assert "      - torchvision==0.22.1+cu128\n" in torch["export"]
    assert "  - python=3.11.0=stand_in\n" in torch["export"]
    plain = lab.gpunode("envs", str(inv), "--limit", "lab-02").stdout
    assert "# lab-02: torch (/opt/conda/envs/torch)\nname: torch\n" in plain

    after = lab.tree("lab-02")
    code, evs = apply(lab, inv, "--limit", "lab-02")
    assert code == 0 and of(evs, "change-started") == []
    assert {k: v for k, v in lab.tree("lab-02").items() if "__pycache__" not in k} == {
        k: v for k, v in after.items() if "__pycache__" not in k
    }


def test_conda_forge_only_needs_no_tos(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, "lab-01")
    conda = {
        "prefix": "/opt/conda",
        "channels": ["conda-forge"],
        "envs": {"cf": {"python": "3.11", "packages": {"tqdm": "4.67.1"}}},
    }
    inv = lab.inventory(tmp_path, **BARE, conda=conda)
    code, evs = apply(lab, inv, "--limit", "lab-01")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    history = on_host(inv, "lab-01", "cat /opt/conda/envs/cf/conda-meta/history")
    assert "--override-channels -c conda-forge" in history
    assert on_host(inv, "lab-01", "ls -A /opt/conda/conda-meta").split().count("tos") == 0
    assert "tqdm==4.67.1" in freeze(inv, "lab-01", "cf")
    code, evs = apply(lab, inv, "--limit", "lab-01")
    assert code == 0 and of(evs, "change-started") == []


ENV_YML = """name: data
channels:
  - conda-forge
  - nodefaults
dependencies:
  - python=3.11
  - pip
  - pip:
      - numpy==2.1.3
"""


def test_env_declared_by_its_files_is_updated_only_when_they_change(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, "lab-01")
    (tmp_path / "envs").mkdir(parents=True)
    (tmp_path / "envs/data.yml").write_text(ENV_YML)
    (tmp_path / "envs/data.txt").write_text("einops==0.8.0\n")
    env = {"python": "3.11", "environment_file": "envs/data.yml",
           "requirements_file": "envs/data.txt"}  # fmt: skip
    conda = {"prefix": "/opt/conda", "channels": ["conda-forge"], "envs": {"data": env}}
    inv = lab.inventory(tmp_path, **BARE, conda=conda)
    code, evs = apply(lab, inv, "--limit", "lab-01")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    assert {"numpy==2.1.3", "einops==0.8.0"} <= freeze(inv, "lab-01", "data")
    copied = on_host(inv, "lab-01", "cat /var/lib/gpunode/conda/data/environment.yml")
    assert copied == ENV_YML
    record = "/opt/conda/envs/data/conda-meta/gpunode-environment.sha256"
    assert (
        on_host(inv, "lab-01", f"cat {record}").strip()
        == hashlib.sha256(ENV_YML.encode()).hexdigest()
    )
    history = on_host(inv, "lab-01", "cat /opt/conda/envs/data/conda-meta/history")
    assert history.count("conda env update") == 1

    code, evs = apply(lab, inv, "--limit", "lab-01")
    assert code == 0 and of(evs, "change-started") == []

    # a new requirements file: that file and its pip install, nothing of the environment
    (tmp_path / "envs/data.txt").write_text("einops==0.8.1\n")
    before = lab.tree("lab-01")
    assert lab.gpunode("plan", str(inv), "--limit", "lab-01").returncode == 0
    assert lab.tree("lab-01") == before, "plan wrote to the host"
    code, evs = apply(lab, inv, "--limit", "lab-01")
    assert code == 0
    started = sorted(e["title"] for e in of(evs, "change-started"))
    assert started == ["conda: conda env data from its requirements file",
                       "conda: requirements file of data"]  # fmt: skip
    assert "einops==0.8.1" in freeze(inv, "lab-01", "data")
    history = on_host(inv, "lab-01", "cat /opt/conda/envs/data/conda-meta/history")
    assert history.count("conda env update") == 1
