"""`gpunode mirror` on the lab: built (the driver's packages, the Miniconda installer) from
an upstream copy of the lab's signed repository, built again without downloading anything,
then with the upstream stopped a fresh host converges from the served mirror; a .deb the
mirror does not hold is refused at plan time."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import http.server
import json
import re
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gpunode.inventory import load
from tests.apply.conftest import DPKG, Lab, apply, fresh, of, on_host, packages
from tests.apply.test_faults_repo import DRIVER, HOST, closed_port, copy_repo, inventory
from tests.conftest import until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

# the mirror is built for the driver and conda (its installer, from the lab's own server)
BUILT = {**DRIVER, "conda": {"prefix": "/opt/conda", "tos": "accept"}}
ASKED = re.compile(r"(?<![^\s'])([a-z0-9][a-z0-9+.-]*)=([0-9][^\s']*)")  # name=version, =glob


class LoggingHandler(http.server.SimpleHTTPRequestHandler):
    """The upstream's access log: (path, status) of every request."""

    log: list[tuple[str, int]]

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        self.log.append((self.path, int(code)))

    def log_message(self, format: str, *args: Any) -> None:
        pass


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


def test_a_fresh_host_converges_from_the_mirror_with_the_upstream_gone(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    copy_repo(lab, tmp_path / "upstream")
    srv, log = upstream(tmp_path / "upstream")
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    out = tmp_path / "mirror"
    try:
        built = inventory(lab, tmp_path / "up", url, **BUILT)
        mirror(lab, built, out)
        debs = [p for p, code in log if p.endswith(".deb") and code == 200]
        assert any("nvidia-open-550" in p for p in debs), debs
        assert len(debs) == len(set(debs)), debs  # each file once
        log.clear()
        again = mirror(lab, built, out)
        assert " 0 files downloaded" in again, again
        assert [e for e in log if e[1] == 200] == [], log  # indexes 304, no .deb asked for
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
    port = closed_port()
    serve = ["mirror", "serve", str(out), "--bind", f"127.0.0.1:{port}"]
    served = subprocess.Popen([sys.executable, "-m", "gpunode", *serve], env=lab.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        local = f"http://127.0.0.1:{port}"
        until(lambda: answers(f"{local}/ubuntu2204/x86_64/InRelease"), 30, "the mirror serving")
        inv = inventory(lab, tmp_path / "mirrored", local, **DRIVER)

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

        plan = json.loads(lab.gpunode("plan", str(inv), "--limit", HOST, "--json").stdout)
        commands = [c for ch in plan["hosts"][HOST]["changes"] for c in ch["commands"]]
        planned = {m[1]: m[2] for c in commands if "install" in c for m in ASKED.finditer(c)}
        assert "nvidia-open-550" in planned, plan["hosts"][HOST]
        code, evs = apply(lab, inv, "--limit", HOST, "--no-smoke")
        assert code == 0, [e.get("message") for e in of(evs, "host-finished", HOST)]
    finally:
        served.terminate()
        served.wait(10)
    have = packages(inv, HOST)
    installed = {n: have.get(n, ("absent",))[0] for n in planned}
    assert all(fnmatch.fnmatchcase(installed[n], v) for n, v in planned.items()), installed
    sources = on_host(inv, HOST, "cat /etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list")
    assert f"{local}/ubuntu2204/x86_64/" in sources and url not in sources, sources
    assert "iU" not in on_host(inv, HOST, DPKG)
