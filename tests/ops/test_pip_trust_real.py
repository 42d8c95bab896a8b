"""The pip step against real pip and a plain-http wheel index that is not on loopback, as a
mirror served by `gpunode mirror serve` on a site's network is: in a network namespace of
the test's own, with a documentation address (192.0.2.10) on its loopback device.

pip ignores such an index ("not a trusted or secure host") unless it is named with
--trusted-host: the plan that repos.insecure_http allows must install, the one without
must not, and what is installed is read from the env itself.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunode.execute.readhost import read_host
from gpunode.roles.ops import OPERATIONS, OpContext
from gpunode.transport.local import LocalTransport
from tests.conftest import SLOT, until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and ip (netns)"
    ),
]

ADDRESS = "192.0.2.10"
PORT = 8470


def _wheel(folder: Path) -> Path:
    """A one-module wheel, written as the wheel format says (no build tool needed)."""
    name = "gpunode_trust_probe-1.0-py3-none-any.whl"
    files = {
        "gpunode_trust_probe/__init__.py": b"VALUE = 1\n",
        "gpunode_trust_probe-1.0.dist-info/METADATA": (
            b"Metadata-Version: 2.1\nName: gpunode-trust-probe\nVersion: 1.0\n"
        ),
        "gpunode_trust_probe-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    record += "gpunode_trust_probe-1.0.dist-info/RECORD,,\n"
    files["gpunode_trust_probe-1.0.dist-info/RECORD"] = record.encode()
    out = folder / name
    with zipfile.ZipFile(out, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return out


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(netns name, the env's python): a PEP 503 index served over http on 192.0.2.10
    inside a namespace of our own, and a fresh venv with pip."""
    project = tmp_path / "www" / "simple" / "gpunode-trust-probe"
    project.mkdir(parents=True)
    wheel = _wheel(project)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (project / "index.html").write_text(f'<a href="{wheel.name}#sha256={sha}">{wheel.name}</a>\n')
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "env")], check=True)
    ns = f"gpunode-piptrust-{SLOT}-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    server = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", ns, "addr", "add", f"{ADDRESS}/32", "dev", "lo"], check=True)
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "http.server", str(PORT),
             "--bind", ADDRESS, "--directory", str(tmp_path / "www")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        probe = ["ip", "netns", "exec", ns, "python3", "-c",
                 f"import socket; socket.create_connection(('{ADDRESS}', {PORT}), 1)"]  # fmt: skip
        until(lambda: subprocess.run(probe, capture_output=True).returncode == 0, 30,
              "the index served")  # fmt: skip
        yield ns, tmp_path / "env" / "bin" / "python"
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        subprocess.run(["ip", "netns", "del", ns], check=False)


def _pip_step(python: Path, *, insecure_http: bool) -> str:
    op = OPERATIONS["pip"]
    args = op.parse(
        {
            "python": str(python),
            "packages": [{"name": "gpunode-trust-probe", "version": "1.0"}],
            "index_url": f"http://{ADDRESS}:{PORT}/simple",
            "insecure_http": insecure_http,
        }
    )
    facts, probes = read_host(LocalTransport(), files=op.paths(args), probes=op.probes(args))
    (change,) = op.plan(args, OpContext("site", "task", facts, probes=probes))
    (command,) = change.commands
    return command


def _installed(python: Path) -> bool:
    check = "import importlib.metadata as m; m.version('gpunode-trust-probe')"
    return subprocess.run([str(python), "-c", check], capture_output=True).returncode == 0


def _run_in(ns: str, command: str) -> subprocess.CompletedProcess[str]:
    # pip's own settings only: no site or user pip.conf, no cache, no other index
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
           "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # fmt: skip
    return subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", command],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip


def test_a_plain_http_mirror_index_is_used_only_when_the_inventory_allows_it(
    index: tuple[str, Path],
) -> None:
    ns, python = index
    refused = _run_in(ns, _pip_step(python, insecure_http=False))
    assert refused.returncode != 0, refused.stdout
    assert "not a trusted or secure host" in refused.stdout + refused.stderr
    assert not _installed(python)

    allowed = _run_in(ns, _pip_step(python, insecure_http=True))
    assert allowed.returncode == 0, allowed.stderr
    assert _installed(python)
