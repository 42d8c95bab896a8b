"""`gpunode mirror` of an env declared by its environment.yml and requirements.txt on the
lab: built from an upstream copy of the lab's repositories, the upstream stopped, a fresh
host's env converges from the served mirror with the files' packages at their versions; a
wheel of the requirements file the mirror does not hold is refused at plan time, naming
the file."""

from __future__ import annotations

import hashlib
import json
import shlex
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host
from tests.apply.test_faults_repo import HOST, copy_repo
from tests.apply.test_mirror_lab import answers, mirror, serving, upstream
from tests.apply.test_mirror_lab import inventory as mirror_lab_inventory

pytestmark = [pytest.mark.lab, pytest.mark.slow]

BARE: dict[str, Any] = {
    "driver": None, "cuda": None, "cudnn": None, "nccl": None, "cuda_env": False, "smoke": [],
}  # fmt: skip
ENV = {"python": "3.11", "environment_file": "envs/data.yml", "requirements_file": "envs/data.txt"}

# an environment.yml as people write them: channels, conda specs, a pip: sub-list with a
# range and a marker
ENVIRONMENT_YML = """\
name: data
channels:
  - {channel}
  - nodefaults
dependencies:
  - python=3.11
  - python_abi=3.11
  - pip
  - pip:
      - numpy==2.1.3
      - tqdm>=4.67 ; python_version >= "3.8"
"""

# as pip-compile --generate-hashes writes one: the hosts' pip checks the hash
REQUIREMENTS_TXT = """\
#
# pip-compile --generate-hashes requirements.in
#
einops==0.8.1 \\
    --hash=sha256:{sha}
    # via -r requirements.in
"""


def inventory(lab: Lab, tmp: Path, url: str, mirror: bool, sha: str) -> Path:
    """The lab's inventory (test_mirror_lab's, with this env alone) and the env's files,
    every repository at `url`: the lab's layout (an upstream copy) or the mirror's."""
    conda = {"prefix": "/opt/conda", "envs": {"data": ENV}}
    path = mirror_lab_inventory(lab, tmp, url, mirror, {**BARE, "conda": conda})
    channel = url + ("/conda/pkgs/main" if mirror else "/pkgs/main")  # as conda.channels
    (tmp / "envs").mkdir(exist_ok=True)
    (tmp / "envs/data.yml").write_text(ENVIRONMENT_YML.format(channel=channel))
    (tmp / "envs/data.txt").write_text(REQUIREMENTS_TXT.format(sha=sha))
    return path


def test_an_env_declared_by_its_files_converges_from_the_mirror(lab: Lab, tmp_path: Path) -> None:
    fresh(lab, HOST)
    copy_repo(lab, tmp_path / "upstream")
    (wheel,) = (tmp_path / "upstream").rglob("simple/einops/einops-0.8.1-*.whl")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    srv, log = upstream(tmp_path / "upstream")
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    out = tmp_path / "mirror"
    try:
        mirror(lab, inventory(lab, tmp_path / "up", url, False, sha), out)
        files = [urllib.parse.unquote(p) for p, code in log if code == 200]
        # the files' packages came from the upstream: the pip: sub-list's (a range), the
        # requirements file's (hashed), and the env file's python_abi (nothing else takes
        # it: conda_env's Python does not depend on it) from its channel
        for name in ("numpy-2.1.3-", "tqdm-4.67.1-", "einops-0.8.1-"):
            assert any(f"/{name}" in p and p.endswith(".whl") for p in files), (name, files)
        assert any("/pkgs/main/linux-64/python_abi-3.11-" in p for p in files), files
    finally:
        srv.shutdown()
        srv.server_close()
    assert not answers(f"{url}/pkgs/main/linux-64/repodata.json")  # the upstream is gone
    channel = json.loads((out / "conda/pkgs/main/linux-64/repodata.json").read_text())
    assert "python_abi-3.11-2_cp311.tar.bz2" in channel["packages"], channel

    with serving(lab, out) as local:
        inv = inventory(lab, tmp_path / "mirrored", local, True, sha)
        # a wheel the requirements file pins, missing from the mirror: refused, named
        manifest = out / "simple" / "gpunode-mirror.json"
        whole = manifest.read_text()
        held = json.loads(whole)["files"]
        manifest.write_text(
            json.dumps({"files": {k: v for k, v in held.items() if "einops" not in k}})
        )
        refused = lab.gpunode("plan", str(inv), "--limit", HOST)
        manifest.write_text(whole)
        assert refused.returncode == 4, refused.stdout + refused.stderr
        assert "holds no wheel of einops 0.8.1 (envs/data.txt)" in refused.stdout, refused.stdout

        code, evs = apply(lab, inv, "--limit", HOST, "--no-smoke")
        assert code == 0, [e.get("message") for e in of(evs, "host-finished", HOST)]
    # the env's pip took the files' packages from the mirror, at the versions they name
    names = ("numpy", "tqdm", "einops")
    check = f"import importlib.metadata as m; [print(n, m.version(n)) for n in {names}]"
    got = on_host(inv, HOST, f"/opt/conda/envs/data/bin/python -c {shlex.quote(check)}")
    assert dict(line.split() for line in got.splitlines()) == {
        "numpy": "2.1.3", "tqdm": "4.67.1", "einops": "0.8.1",
    }  # fmt: skip
    recorded = on_host(inv, HOST, "cat /opt/conda/envs/data/conda-meta/gpunode-requirements.sha256")
    text = (tmp_path / "mirrored/envs/data.txt").read_text()
    assert recorded.strip() == hashlib.sha256(text.encode()).hexdigest()
