"""The bandwidth benchmark's harness (bench/compare/coldlink.py), small and fast: the lab
repository's access log records each request's bytes and the counter sums them; the link
limit slows only its own address and is gone afterwards, also after an error; padded
packages weigh real size / S and dpkg still unpacks only their files."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from gpunode_lab.repo.deb import Package, Payload, deb_bytes
from gpunode_lab.repo.padding import real_size
from gpunode_lab.supervisor import _LoggingHandler
from tests.conftest import until

REPO = Path(__file__).resolve().parents[2]


def _bench_module(name: str) -> ModuleType:
    """bench/compare/NAME.py by its path: `bench` in here is this test folder."""
    spec = importlib.util.spec_from_file_location(
        f"_coldlink_{name}", REPO / "bench" / "compare" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


upstream = _bench_module("upstream")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """The lab repository's own request handler on 127.0.0.1, over a folder of files."""
    from http.server import ThreadingHTTPServer

    root, log = tmp_path / "www", tmp_path / "repo-access.log"
    (root / "ubuntu2204" / "x86_64").mkdir(parents=True)
    handler = type("_H", (_LoggingHandler,), {"access_log": log})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", root, log
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_access_log_records_bytes_and_the_counter_sums_them(
    served: tuple[str, Path, Path],
) -> None:
    url, root, log = served
    folder = root / "ubuntu2204" / "x86_64"
    (folder / "a_1_amd64.deb").write_bytes(os.urandom(300_001))
    (folder / "b_1_amd64.deb").write_bytes(os.urandom(70_000))
    (folder / "Packages").write_bytes(b"Package: a\n" * 500)
    (folder / "InRelease").write_bytes(b"signed" * 100)
    before = upstream.offset(log)
    for name in ("a_1_amd64.deb", "a_1_amd64.deb", "b_1_amd64.deb", "Packages", "InRelease"):
        with urllib.request.urlopen(f"{url}/ubuntu2204/x86_64/{name}") as resp:
            resp.read()
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{url}/ubuntu2204/x86_64/missing.deb")
    head = urllib.request.Request(f"{url}/ubuntu2204/x86_64/a_1_amd64.deb", method="HEAD")
    urllib.request.urlopen(head).close()

    # a request's line is written once it is answered, just after the client has it
    until(lambda: upstream.count(log, before).requests == 7, 10, "7 requests logged")
    got = upstream.count(log, before)
    assert got.requests == 7  # the 404's error note is not a request
    assert got.deb_bytes == 2 * 300_001 + 70_000  # a HEAD and a 404 send no file
    assert got.index_bytes == 500 * len(b"Package: a\n") + 600
    assert got.bytes == got.deb_bytes + got.index_bytes
    assert got.debs == 3 and len(got.by_path) == 2
    # the log itself, as a web server's: one line per request, status and bytes last
    lines = log.read_text().splitlines()
    assert any(ln.endswith('"GET /ubuntu2204/x86_64/b_1_amd64.deb HTTP/1.1" 200 70000')
               for ln in lines)  # fmt: skip
    assert upstream.count(log, upstream.offset(log)).requests == 0


def test_padded_packages_weigh_real_size_over_scale_and_unpack_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = Package("libnccl2", "2.28.3-1+cuda13.0", "NCCL", files=[Payload("/usr/lib/x.so", b"x")])
    plain = deb_bytes(pkg)
    monkeypatch.setenv("GPUNODE_LAB_PAD_SCALE", "1000")
    padded = deb_bytes(pkg)
    want = real_size(pkg.name, pkg.version) // 1000
    assert want - 1 <= len(padded) <= want and want > 200 * 1024
    assert padded.startswith(plain)
    other = Package("cuda-keyring", "1.1-1", "key")  # not in the table: as it was
    monkeypatch.delenv("GPUNODE_LAB_PAD_SCALE")
    assert deb_bytes(other) == deb_bytes(other)
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is not installed")
    deb = tmp_path / "p.deb"
    deb.write_bytes(padded)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "x")], check=True)
    files = sorted(str(p.relative_to(tmp_path / "x")) for p in (tmp_path / "x").rglob("*"))
    assert files == ["usr", "usr/lib", "usr/lib/x.so"]


CHILD = r"""
import functools, http.server, json, subprocess, sys, tempfile, threading, time, pathlib
import urllib.request
sys.path.insert(0, sys.argv[1])
from bench.compare import shaping
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
root = pathlib.Path(tempfile.mkdtemp())
(root / "f").write_bytes(bytes(4 << 20))  # 4 MiB: the class's 256 KiB burst is 1/16 of it
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
ports = []
for _ in range(2):
    handler = functools.partial(H, directory=str(root))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    ports.append(srv.server_address[1])
def mbit(port):
    t = time.monotonic()
    n = len(urllib.request.urlopen(f"http://127.0.0.1:{port}/f").read())
    return n * 8 / (time.monotonic() - t) / 1e6
out = {}
with shaping.shaped("127.0.0.1", ports[0], 20):
    out["qdisc"] = shaping.root_qdisc()
    out["limited"], out["other"] = mbit(ports[0]), mbit(ports[1])
    try:
        shaping.on("127.0.0.1", ports[1], 20)
    except RuntimeError as exc:
        out["refused"] = str(exc)
out["after"] = shaping.root_qdisc()
try:
    with shaping.shaped("127.0.0.1", ports[0], 20):
        raise KeyError("boom")
except KeyError:
    out["after_error"] = shaping.root_qdisc()
out["unlimited"] = mbit(ports[0])
print(json.dumps(out))
"""


@pytest.mark.lab
def test_the_link_limit_slows_only_its_address_and_is_removed() -> None:
    if os.geteuid() != 0 or not shutil.which("tc") or not shutil.which("unshare"):
        pytest.skip("needs root, tc and unshare")
    # in a network namespace of its own: its lo is nobody else's
    proc = subprocess.run(
        ["unshare", "--net", "--", sys.executable, "-c", CHILD, str(REPO)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["qdisc"].startswith("qdisc htb 1: root")
    assert 12 < out["limited"] < 26, out  # 20 Mbit/s, give or take the burst (21.3 at most)
    assert out["other"] > 100, out  # another port on the same address is not limited
    assert "already has a root qdisc" in out["refused"]
    assert out["after"] == "" and out["after_error"] == ""
    assert out["unlimited"] > 100, out


def _run(tool: str, i: int, wall: float, load: float) -> dict[str, object]:
    up = {"bytes": 100 * 2**20, "deb_bytes": 99 * 2**20, "index_bytes": 2**20, "debs": 10}
    return {"tool": tool, "run": i, "wall_s": wall, "rc": 0, "converged": True,
            "upstream": up, "load": {"min": load, "median": load, "max": load + 1}}  # fmt: skip


def test_the_report_names_each_tools_runs_and_the_load_it_ran_under(tmp_path: Path) -> None:
    """A tool run once (--once) is a row of 1 run beside the tools of every round, each with
    the load average its runs saw; written between the doc's markers, the text around kept."""
    runs = [_run("pyinfra", i, w, 3.0 * i) for i, w in enumerate((400.0, 380.0, 420.0))]
    runs.append(_run("ansible", 2, 500.0, 40.0))
    saved = {"started": "then", "commit": "abc1234", "hosts": 10, "scale": 10, "mbit": 100,
             "machine": {"os": "os", "kernel": "k", "nproc": 2},
             "link": {"file": "big.deb", "bytes": 2**20, "unshaped_s": 0.01, "shaped_s": 0.08,
                      "mbit_measured": 100.0}, "runs": runs}  # fmt: skip
    (tmp_path / "runs.json").write_text(json.dumps(saved))
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- bench:s10:begin -->\nold\n<!-- bench:s10:end -->\nafter\n")
    subprocess.run(
        [sys.executable, "-m", "bench.compare.coldlink", "--report-only", "--out",
         str(tmp_path / "runs.json"), "--doc", str(doc), "--mark", "s10"],
        cwd=REPO, check=True,
    )  # fmt: skip
    text = doc.read_text()
    assert text.startswith("before\n<!-- bench:s10:begin -->\n") and text.endswith("after\n")
    assert "old" not in text
    cells = [ln.split(" | ") for ln in text.splitlines() if ln.startswith("| ")]
    rows = {c[0][2:]: c for c in cells[1:]}  # past the header
    assert rows["pyinfra"][1:4] == ["3", "400.0", "380.0-420.0"]
    assert rows["pyinfra"][-1] == "3.0 (7.0) |"  # median of the runs' medians (max)
    assert rows["ansible"][1:3] == ["1", "500.0"]
    # projected: each wall + 9 x 100 MiB / 12.5 MB/s (75.5 s): 475.5 / 575.5 s
    assert rows["ansible"][-2:] == ["0.80x / 0.83x", "40.0 (41.0) |"]
    assert set(rows) == {"pyinfra", "ansible"}
