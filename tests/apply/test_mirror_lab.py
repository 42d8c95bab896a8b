"""`gpunode mirror` on the lab: built from an upstream copy of the lab's repositories (the
driver's packages, the container toolkit's from its own repository with its key, the
Miniconda installer, the env's Python from the stand-in conda channel, the env's PyTorch
wheels and a PyPI package with what they need), built again without downloading a file,
then with the upstream stopped a fresh host converges from the served mirror; a .deb, the
installer, a wheel or the env's Python the mirror does not hold is refused at plan time."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import http.server
import json
import re
import shlex
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpunode.inventory import load
from tests.apply.labhelpers import DPKG, Lab, apply, fresh, of, on_host, packages
from tests.apply.test_faults_repo import DRIVER, HOST, closed_port, copy_repo, lab_repo
from tests.conftest import until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

ENV = {"python": "3.11", "pytorch": "2.4.1", "torchvision": True, "packages": {"tqdm": "4.67.1"}}
CONDA = {"prefix": "/opt/conda", "envs": {"torch": ENV}}  # channels: the lab's pkgs/main
CONTAINERS = {"runtime": "docker", "version": "1.17.8-1"}
STACK = {**DRIVER, "conda": CONDA, "containers": CONTAINERS}
TOOLKIT = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
           "libnvidia-container-tools", "libnvidia-container1")  # fmt: skip
# apt-get install's name=version (or =glob)
ASKED = re.compile(r"(?<![^\s'])([a-z0-9][a-z0-9+.-]*)=([0-9][0-9A-Za-z.+~:*-]*)(?![^\s'])")
PIP = re.compile(r"'?([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s']+)'?")  # pip's name==version
# where `gpunode mirror` puts each repository (docs/air-gapped.md)
MIRRORED = {"pytorch_index": "/pytorch", "pypi_index": "/simple",
            "nvidia_container": "/libnvidia-container"}  # fmt: skip


def inventory(lab: Lab, tmp: Path, url: str, mirror: bool, stack: dict[str, Any] = STACK) -> Path:
    """The lab's inventory with every repository at `url`: the lab's layout (an upstream
    copy), or the mirror's."""
    from ruamel.yaml import YAML

    yaml = YAML()
    path = lab.inventory(tmp, **stack)
    doc = yaml.load(path.read_text())
    repos = doc["defaults"]["repos"]
    base, _ = lab_repo(lab)
    installer = "/miniconda/" + repos["conda_installer"].rsplit("/", 1)[-1]
    for key in ("nvidia", "conda_installer", *MIRRORED):
        repos[key] = url + (MIRRORED.get(key, "") if mirror else repos[key].removeprefix(base))
    if mirror:
        repos["conda_installer"] = url + installer
    channel = "/conda/pkgs/main" if mirror else "/pkgs/main"
    doc["defaults"]["stack"]["conda"]["channels"] = [url + channel]
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


class LoggingHandler(http.server.SimpleHTTPRequestHandler):
    """The upstream's access log: (path, status) of every request."""

    log: list[tuple[str, int]]

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        self.log.append((self.path, int(code)))

    def log_message(self, format: str, *args: Any) -> None:
        pass


def installer_name(inv: Path) -> str:
    return load(inv).hosts[HOST].repos.conda_installer.rsplit("/", 1)[-1]


def upstream(root: Path) -> tuple[http.server.ThreadingHTTPServer, list[tuple[str, int]]]:
    log: list[tuple[str, int]] = []
    handler = type("Handler", (LoggingHandler,), {"log": log})
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
    )
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, log


def mirror(lab: Lab, inv: Path, out: Path) -> str:
    res = lab.gpunode("mirror", str(inv), str(out), "--limit", HOST)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def serving(lab: Lab, folder: Path) -> Iterator[str]:
    """`gpunode mirror serve` of `folder` on a free loopback port, until the block ends:
    its URL, once it answers."""
    port = closed_port()
    serve = ["mirror", "serve", str(folder), "--bind", f"127.0.0.1:{port}"]
    served = subprocess.Popen([sys.executable, "-m", "gpunode", *serve], env=lab.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        local = f"http://127.0.0.1:{port}"
        until(lambda: answers(f"{local}/ubuntu2204/x86_64/InRelease"), 30, "the mirror serving")
        yield local
    finally:
        served.terminate()
        served.wait(10)


def test_a_fresh_host_converges_from_the_mirror_with_the_upstream_gone(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    knob = lab.gpunode("lab", "fault", HOST, "container-runtime", "docker")
    assert knob.returncode == 0, knob.stderr
    copy_repo(lab, tmp_path / "upstream")
    srv, log = upstream(tmp_path / "upstream")
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    out = tmp_path / "mirror"
    try:
        built = inventory(lab, tmp_path / "up", url, mirror=False)
        mirror(lab, built, out)
        files = [p for p, code in log if code == 200 and not p.endswith("/")]
        debs = [p for p in files if p.endswith(".deb")]
        assert any("nvidia-open-550" in p for p in debs), debs
        assert any("nvidia-container-toolkit_1.17.8-1" in p for p in debs), debs
        wheels = [urllib.parse.unquote(p) for p in files if p.endswith(".whl")]
        assert any("/torchvision-0.19.1+" in p for p in wheels), wheels
        assert any("/torch-2.4.1+" in p for p in wheels), wheels  # torchvision's dependency
        assert any("/pkgs/main/linux-64/python-3.11.11-" in p for p in files), files
        payload = [p for p in files if p.endswith((".deb", ".whl", ".sh", ".tar.bz2"))]
        assert len(payload) == len(set(payload)), payload  # each once (indexes: plan's too)
        log.clear()
        again = mirror(lab, built, out)
        assert " 0 files downloaded" in again, again
        # indexes 304 (pip's index pages aside, folders), no file asked for again
        assert [p for p, code in log if code == 200 and not p.endswith("/")] == [], log
    finally:
        srv.shutdown()
        srv.server_close()
    assert not answers(f"{url}/ubuntu2204/x86_64/InRelease")  # the upstream is gone

    installer = load(built).hosts[HOST].repos
    got = (out / "miniconda" / installer.conda_installer.rsplit("/", 1)[-1]).read_bytes()
    assert hashlib.sha256(got).hexdigest() == installer.conda_installer_sha256
    folder = out / "ubuntu2204" / "x86_64"
    for name in ("InRelease", "Packages"):  # NVIDIA's signed indexes, byte for byte
        upstream_file = tmp_path / "upstream" / "ubuntu2204" / "x86_64" / name
        assert (folder / name).read_bytes() == upstream_file.read_bytes()
    with serving(lab, out) as local:
        inv = inventory(lab, tmp_path / "mirrored", local, mirror=True)

        # a file the mirror does not hold (its manifest) is refused at plan time, named
        manifest = folder / "gpunode-mirror.json"
        whole = manifest.read_text()
        files = json.loads(whole)["files"]
        (gone,) = [f for f in files if "nvidia-open-550_" in f]
        manifest.write_text(json.dumps({"files": {k: v for k, v in files.items() if k != gone}}))
        refused = lab.gpunode("plan", str(inv), "--limit", HOST)
        assert refused.returncode == 4, refused.stdout + refused.stderr
        assert f"apt would download {gone} (" in refused.stdout, refused.stdout
        manifest.write_text(whole)
        # so are the installer, a pip package and the env's Python, each missing from its
        # folder's manifest
        for where, name, said in (
            (out / "miniconda", installer_name(inv), f"does not hold {installer_name(inv)}"),
            (out / "simple", "tqdm-4.67.1-py3-none-any.whl", "holds no wheel of tqdm 4.67.1"),
            (
                out / "conda/pkgs/main/linux-64",
                "python-3.11.11-h5148396_0.tar.bz2",
                "/conda/pkgs/main hold no python 3.11",
            ),
        ):
            whole = (where / "gpunode-mirror.json").read_text()
            rest = {k: v for k, v in json.loads(whole)["files"].items() if k != name}
            assert len(rest) < len(json.loads(whole)["files"]), whole
            (where / "gpunode-mirror.json").write_text(json.dumps({"files": rest}))
            refused = lab.gpunode("plan", str(inv), "--limit", HOST)
            (where / "gpunode-mirror.json").write_text(whole)
            assert refused.returncode == 4, refused.stdout + refused.stderr
            assert said in refused.stdout, refused.stdout

        plan = json.loads(lab.gpunode("plan", str(inv), "--limit", HOST, "--json").stdout)
        commands = [c for ch in plan["hosts"][HOST]["changes"] for c in ch["commands"]]
        planned = {m[1]: m[2] for c in commands if "apt-get" in c for m in ASKED.finditer(c)}
        wanted = {m[1]: m[2] for c in commands if "pip install" in c for m in PIP.finditer(c)}
        assert "nvidia-open-550" in planned and "nvidia-container-toolkit" in planned, commands
        assert {"torch", "torchvision", "tqdm"} <= set(wanted), commands
        code, evs = apply(lab, inv, "--limit", HOST, "--no-smoke")
        assert code == 0, [e.get("message") for e in of(evs, "host-finished", HOST)]
    have = packages(inv, HOST)
    installed = {n: have.get(n, ("absent",))[0] for n in planned}
    assert all(fnmatch.fnmatchcase(installed[n], v) for n, v in planned.items()), installed
    assert {p: have.get(p) for p in TOOLKIT} == {p: ("1.17.8-1", True) for p in TOOLKIT}
    sources = on_host(inv, HOST, "cat /etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list")
    assert f"{local}/ubuntu2204/x86_64/" in sources and url not in sources, sources
    toolkit = on_host(inv, HOST, "cat /etc/apt/sources.list.d/nvidia-container-toolkit.list")
    assert f"{local}/libnvidia-container/stable/deb/" in toolkit, toolkit
    assert "iU" not in on_host(inv, HOST, DPKG)
    # the env's pip took the wheels from the mirror: the versions the plan asked for
    names = ("torch", "torchvision", "tqdm")
    check = f"import importlib.metadata as m; [print(n, m.version(n)) for n in {names}]"
    got_env = on_host(inv, HOST, f"/opt/conda/envs/torch/bin/python -c {shlex.quote(check)}")
    versions = dict(line.split() for line in got_env.splitlines())
    assert all(versions[n].split("+")[0] == v for n, v in wanted.items()), (versions, wanted)
    assert versions["torch"].endswith(versions["torchvision"].partition("+")[2]), versions
    # conda made the env from the mirror's channel: the newest python=3.11 and what it needs
    channel = out / "conda" / "pkgs" / "main"
    held = {
        r["name"]: r["version"]
        for sub in ("linux-64", "noarch")
        for r in json.loads((channel / sub / "repodata.json").read_text())["packages"].values()
    }
    assert held == {"python": "3.11.11", "libzlib": "1.3.1", "openssl": "3.0.16",
                    "ca-certificates": "2025.2.25", "tzdata": "2025a", "pip": "25.0",
                    "setuptools": "75.8.0", "wheel": "0.45.1"}  # fmt: skip
    meta = on_host(inv, HOST, "cat /opt/conda/envs/torch/conda-meta/*.json")
    recorded = {r["name"]: r for r in map(json.loads, re.split(r"(?<=\})\s*(?=\{)", meta))}
    assert {n: recorded[n]["version"] for n in held} == held, recorded
    assert all(r["url"].startswith(f"{local}/conda/pkgs/main/") for r in recorded.values())
