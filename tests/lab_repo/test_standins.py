"""The conda installer and pip wheel stand-ins, used the way gpunode's conda role uses them."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.lab_repo.conftest import ServedRepo

pytestmark = pytest.mark.slow


def sh(*cmd: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout}\n{proc.stderr}"
    return proc


def test_conda_env_with_torch_and_tensorflow(served_repo: ServedRepo, tmp_path: Path) -> None:
    env = dict(os.environ, HOME=str(tmp_path / "home"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("VIRTUAL_ENV", None)
    installer = tmp_path / "Miniconda3-latest-Linux-x86_64.sh"
    url = f"{served_repo.url}/conda/Miniconda3-latest-Linux-x86_64.sh"
    with urllib.request.urlopen(url) as r:
        installer.write_bytes(r.read())
    prefix = tmp_path / "miniconda3"
    sh("sh", str(installer), "-b", "-p", str(prefix), env=env)
    conda = str(prefix / "bin/conda")
    assert sh(conda, "--version", env=env).stdout.startswith("conda 25.")
    again = subprocess.run(["sh", str(installer), "-b", "-p", str(prefix)], capture_output=True)
    assert again.returncode == 1 and b"already exists" in again.stderr
    sh("sh", str(installer), "-b", "-u", "-p", str(prefix), env=env)

    target = tmp_path / "envs/ml"
    # conda >= 25.5 stops at Anaconda's default channels until their ToS is accepted
    refused = subprocess.run(
        [conda, "create", "-y", "-p", str(target), "python=3.11"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert refused.returncode == 1 and not target.exists()
    assert refused.stderr.strip().splitlines()[:3] == [
        "CondaToSNonInteractiveError: Terms of Service have not been accepted for the following"
        " channels. Please accept or remove them before proceeding:",
        "    - https://repo.anaconda.com/pkgs/main",
        "    - https://repo.anaconda.com/pkgs/r",
    ]
    sh(conda, "tos", "accept", "--override-channels", "--channel",
       "https://repo.anaconda.com/pkgs/main", "--channel", "https://repo.anaconda.com/pkgs/r",
       "--system", env=env)  # fmt: skip
    records = sorted((prefix / "conda-meta/tos").glob("*/*.json"))
    assert len(records) == 2
    assert {json.loads(r.read_text())["base_url"] for r in records} == {
        "https://repo.anaconda.com/pkgs/main",
        "https://repo.anaconda.com/pkgs/r",
    }
    sh(conda, "create", "-y", "-p", str(target), "python=3.11", "pip", env=env)
    meta = json.loads((target / "conda-meta/python-3.11.0-stand_in.json").read_text())
    assert meta["requested_spec"] == "python=3.11"
    assert "python=3.11" in (target / "conda-meta/history").read_text()
    listed = json.loads(sh(conda, "env", "list", "--json", env=env).stdout)["envs"]
    assert str(target) in listed and str(prefix) in listed
    sh(conda, "create", "-y", "-n", "named", "python=3.11", env=env)
    assert (prefix / "envs/named/conda-meta").is_dir()

    pip = [conda, "run", "-p", str(target), "python", "-m", "pip", "install", "-q"]
    sh(*pip, "--index-url", f"{served_repo.url}/pip/cu124/", "torch==2.4.1+cu124", env=env)
    sh(
        *pip,
        "--index-url",
        f"{served_repo.url}/pip/simple/",
        "tensorflow[and-cuda]==2.18.1",
        env=env,
    )
    probe = (
        "import torch, tensorflow as tf; print(torch.__version__, torch.version.cuda, "
        "torch.cuda.is_available(), torch.backends.cudnn.version(), tf.__version__, "
        "tf.sysconfig.get_build_info()['cuda_version'], tf.config.list_physical_devices('GPU'))"
    )
    out = sh(conda, "run", "-p", str(target), "python", "-c", probe, env=env).stdout
    assert out.split() == ["2.4.1+cu124", "12.4", "False", "90100", "2.18.1", "12.5", "[]"]
    frozen = sh(conda, "run", "-p", str(target), "python", "-m", "pip", "freeze", env=env).stdout
    assert "nvidia-cudnn-cu12==9.3.0.75" in frozen
    assert "nvidia-cuda-runtime-cu12==12.5.82" in frozen
    note = sh(
        conda, "run", "-p", str(target), "python", "-c",
        "import torch.cuda as c; print(c.STAND_IN_NOTE)", env=env,
    ).stdout  # fmt: skip
    assert "stand-in" in note
    sh(conda, "env", "remove", "-p", str(target), env=env)
    assert not target.exists()


def test_pip_indexes_follow_pep_503(served_repo: ServedRepo) -> None:
    root = served_repo.root / "pip"
    assert (root / "cu124/torch/index.html").exists()
    assert (root / "cu130/torch/torch-2.11.0+cu130-py3-none-any.whl").exists()
    page = (root / "simple/index.html").read_text()
    for project in ("torch", "tensorflow", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12"):
        assert f'href="{project}/"' in page
    assert "#sha256=" in (root / "simple/torch/index.html").read_text()


def test_conda_tos_auto_accept_or_conda_forge_only(served_repo: ServedRepo, tmp_path: Path) -> None:
    env = dict(os.environ, HOME=str(tmp_path / "home"))
    env.pop("VIRTUAL_ENV", None)
    installer = tmp_path / "Miniconda3-latest-Linux-x86_64.sh"
    with urllib.request.urlopen(f"{served_repo.url}/conda/{installer.name}") as r:
        installer.write_bytes(r.read())
    prefix = tmp_path / "miniconda3"
    sh("sh", str(installer), "-b", "-p", str(prefix), env=env)
    conda = str(prefix / "bin/conda")
    # conda-forge alone carries no ToS: nothing recorded, nothing asked
    sh(conda, "create", "-y", "-p", str(tmp_path / "cf"), "--override-channels",
       "-c", "conda-forge", "python=3.11", env=env)  # fmt: skip
    assert not (tmp_path / "home/.conda/tos").exists()
    assert not (prefix / "conda-meta/tos").exists()
    # the plugin's setting, as an environment variable: accepted and recorded for the user
    auto = dict(env, CONDA_PLUGINS_AUTO_ACCEPT_TOS="yes")
    sh(conda, "create", "-y", "-p", str(tmp_path / "d"), "python=3.11", env=auto)
    assert len(list((tmp_path / "home/.conda/tos").glob("*/*.json"))) == 2
