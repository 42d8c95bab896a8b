"""What runs as root is verified: the download steps run for real (sh, curl, sha256sum)
against a file server on loopback, with an attacker's file where the real one should be."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunode.inventory import InventoryError, loads
from gpunode.roles.ops.fetch import PRIVATE_DIR, curl, verified

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()


def run(script: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp)}
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                          timeout=60)  # fmt: skip


def test_a_verified_file_runs_and_its_private_directory_is_gone(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    base, root = served
    body = b"#!/bin/sh\necho installed from $0\n"
    (root / "installer.sh").write_bytes(body)
    sha = hashlib.sha256(body).hexdigest()
    script = (
        f'{PRIVATE_DIR} && echo "$d" > {tmp_path}/dir && '
        + verified(f"{base}/installer.sh", sha, '"$d"/i.sh', insecure_http=True)
        + ' && sh "$d"/i.sh'
    )
    out = run(script, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "installed from /tmp/gpunode." in out.stdout
    used = Path((tmp_path / "dir").read_text().strip())
    assert not used.exists()  # removed when the step ended


def test_a_swapped_file_never_runs(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    real = b"#!/bin/sh\necho real\n"
    (root / "installer.sh").write_bytes(b"#!/bin/sh\ntouch " + str(tmp_path / "owned").encode())
    sha = hashlib.sha256(real).hexdigest()
    script = (
        f"{PRIVATE_DIR} && "
        + verified(f"{base}/installer.sh", sha, '"$d"/i.sh', insecure_http=True)
        + ' && sh "$d"/i.sh'
    )
    out = run(script, tmp_path)
    assert out.returncode != 0
    assert f"{base}/installer.sh: sha256 is not the pinned {sha}" in out.stderr
    assert not (tmp_path / "owned").exists()


def test_plain_http_is_refused_unless_allowed(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    (root / "f").write_text("x")
    refused = run(curl(f"{base}/f", str(tmp_path / "got")), tmp_path)
    assert refused.returncode != 0 and not (tmp_path / "got").exists()
    assert "http" in refused.stderr.lower()  # curl: protocol "http" not supported or disabled
    allowed = run(curl(f"{base}/f", str(tmp_path / "got"), insecure_http=True), tmp_path)
    assert allowed.returncode == 0 and (tmp_path / "got").read_text() == "x"


def test_a_url_cannot_become_an_option(tmp_path: Path) -> None:
    out = run(curl("-K/etc/passwd", str(tmp_path / "got")), tmp_path)
    assert out.returncode != 0 and not (tmp_path / "got").exists()


def test_without_a_pinned_sha256_nothing_is_fetched() -> None:
    with pytest.raises(ValueError, match=r"no sha256 pinned for https://x/i\.sh"):
        verified("https://x/i.sh", "", '"$d"/i.sh')


INV = """
defaults:
  connection: local
  repos: {REPOS}
hosts:
  h: {{}}
"""


def problems(repos: str) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        loads(INV.replace("{REPOS}", repos).replace("{{}}", "{}"), "inv.yaml")
    return [str(p) for p in exc.value.problems]


def test_the_inventory_refuses_http_without_the_lab_opt_in() -> None:
    (msg,) = problems("{nvidia: http://mirror.example/cuda/repos}")
    assert "nvidia uses http://: gpunode installs what it fetches as root" in msg
    assert msg.startswith("inv.yaml:")
    ok = INV.replace("{REPOS}", "{nvidia: http://mirror.example/cuda, insecure_http: true}")
    assert loads(ok.replace("{{}}", "{}"), "inv.yaml").hosts["h"].repos.insecure_http


def test_another_installer_needs_its_own_sha256() -> None:
    (msg,) = problems("{conda_installer: https://mirror.example/Miniconda3-latest.sh}")
    assert "set conda_installer_sha256 to its sha256" in msg
    fixed = "{conda_installer: https://mirror.example/M.sh, conda_installer_sha256: " + (
        '"' + "ab" * 32 + '"}'
    )
    assert loads(INV.replace("{REPOS}", fixed).replace("{{}}", "{}"), "i.yaml").hosts["h"]
