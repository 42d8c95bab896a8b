"""`gpunode exporter` scraped by a real Prometheus server, against `gpunode lab` hosts.

The hosts run the lab repository's driver, whose nvidia-smi stand-in gives the GPU values;
what Prometheus stores is checked against what nvidia-smi printed on each host meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab as TreeLab
from tests.conftest import Lab, until
from tests.tui.test_lab_tmux import install_driver

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent.parent
ALERTS = REPO / "docs" / "prometheus" / "gpunode-alerts.yml"
# nvidia-smi's fields for what the DCGM series carry.
SMI = (
    "index,uuid,name,pci.bus_id,utilization.gpu,temperature.gpu,power.draw,memory.used,"
    "memory.free,clocks.sm,clocks.mem"
)
SERIES = {
    "DCGM_FI_DEV_GPU_UTIL": "utilization.gpu",
    "DCGM_FI_DEV_GPU_TEMP": "temperature.gpu",
    "DCGM_FI_DEV_POWER_USAGE": "power.draw",
    "DCGM_FI_DEV_FB_USED": "memory.used",
    "DCGM_FI_DEV_FB_FREE": "memory.free",
    "DCGM_FI_DEV_SM_CLOCK": "clocks.sm",
    "DCGM_FI_DEV_MEM_CLOCK": "clocks.mem",
}


def prometheus_or_skip() -> None:
    missing = [t for t in ("prometheus", "promtool") if shutil.which(t) is None]
    if not missing:
        return
    why = f"{', '.join(missing)} not installed (apt-get install prometheus; scripts/setup.sh)"
    if os.environ.get("CI"):
        pytest.fail(why + ": CI must run this test")
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_alert_rules_pass_promtool() -> None:
    prometheus_or_skip()
    out = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 8 rules found" in out.stdout


@pytest.fixture
def pristine_after(lab_hosts: Lab) -> Iterator[None]:
    """The session's lab hosts get a fresh disk after the test: the driver installed here
    must not be what later tests of the same lab find."""
    yield
    for host in lab_hosts.names:
        lab_hosts.reset(host)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """A Prometheus of this test's own on loopback, scraping 127.0.0.1:EXPORTER every
    second; yields (its port, the exporter's port)."""
    prometheus_or_skip()
    exporter_port, port = free_port(), free_port()
    config = (
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{json.dumps(str(ALERTS))}]\n"
        "scrape_configs:\n"
        "  - job_name: gpunode\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n"
    )
    with serving(tmp_path, config, port):
        yield port, exporter_port


@contextlib.contextmanager
def serving(tmp_path: Path, config: str, port: int) -> Iterator[None]:
    """Prometheus on 127.0.0.1:PORT with CONFIG (its data and log under tmp_path), ready
    inside the block and stopped after it."""
    path = tmp_path / "prometheus.yml"
    path.write_text(config)
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={path}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    try:
        until(lambda: _ready(port), 60, "prometheus ready")
        yield
    finally:
        proc.terminate()
        proc.wait(30)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


class SmiReader:
    """nvidia-smi on a host every 300 ms for as long as the test runs: every value a
    sample of the exporter can hold is among those read."""

    def __init__(self, lab: Lab, host: str) -> None:
        cmd = f"nvidia-smi --query-gpu={SMI} --format=csv,noheader,nounits -lms 300"
        self.proc = subprocess.Popen(
            lab.ssh_argv(host, cmd), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )

    def rows(self) -> list[dict[str, str]]:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        names = SMI.split(",")
        return [
            dict(zip(names, (p.strip() for p in ln.split(",")), strict=True))
            for ln in out.splitlines()
            if ln.count(",") == len(names) - 1
        ]


def start_exporter(inventory: Path, port: int, state: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "GPUNODE_STATE_DIR": str(state)}
    return subprocess.Popen(
        [sys.executable, "-m", "gpunode", "exporter", str(inventory),
         "--listen", f"127.0.0.1:{port}", "--interval", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_prometheus_stores_every_lab_gpu_as_nvidia_smi_shows_it(
    lab_hosts: Lab, prometheus: tuple[int, int], tmp_path: Path, pristine_after: None
) -> None:
    hosts = lab_hosts.names
    with ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(lambda h: install_driver(lab_hosts, h), hosts))
    lab_hosts.fault(hosts[0], "load", "busy")  # one host at work: no value sits at zero
    lab_hosts.fault(hosts[1], "load", "idle")
    trees = TreeLab(lab_hosts.state_dir, "", {})
    before = {h: trees.tree(h) for h in hosts}
    prom_port, exporter_port = prometheus
    readers = {h: SmiReader(lab_hosts, h) for h in hosts}
    exporter = start_exporter(lab_hosts.inventory_path, exporter_port, tmp_path / "state")
    try:
        gpus = 2 * len(hosts)

        def all_there() -> bool:
            return all(len(query(prom_port, name)) == gpus for name in SERIES)

        until(all_there, 90, f"every DCGM series for all {gpus} lab GPUs in Prometheus")
        stored = {name: query(prom_port, name) for name in SERIES}
        up = query(prom_port, "gpunode_host_up")
    finally:
        exporter.terminate()
        _, err = exporter.communicate(timeout=30)
    read = {h: r.rows() for h, r in readers.items()}
    assert exporter.returncode == 0, err
    assert sorted((s["metric"]["Hostname"], s["value"][1]) for s in up) == [(h, "1") for h in hosts]

    for name, field in SERIES.items():
        for series in stored[name]:
            labels, value = series["metric"], float(series["value"][1])
            host, gpu = labels["Hostname"], labels["gpu"]
            rows = [r for r in read[host] if r["index"] == gpu]
            assert rows, f"nvidia-smi on {host} printed nothing for GPU {gpu}"
            pairs = (("UUID", "uuid"), ("modelName", "name"), ("pci_bus_id", "pci.bus_id"))
            want = {k: rows[0][v] for k, v in pairs}
            assert {k: labels[k] for k in want} == want
            assert labels["device"] == f"nvidia{gpu}" and labels["job"] == "gpunode"
            seen = {float(r[field]) for r in rows}
            assert value in seen, f"{name} of {host} GPU {gpu}: {value} not among {sorted(seen)}"
    busy = [float(s["value"][1]) for s in stored["DCGM_FI_DEV_GPU_UTIL"]
            if s["metric"]["Hostname"] == hosts[0]]  # fmt: skip
    assert busy and min(busy) >= 50
    # Samples only: nothing written on any host (logins aside).
    assert {h: trees.tree(h) for h in hosts} == before
    assert "serving http://127.0.0.1:" in err


def test_a_host_that_drops_is_down_and_its_gpus_leave(
    lab_hosts: Lab, prometheus: tuple[int, int], tmp_path: Path, pristine_after: None
) -> None:
    hosts = lab_hosts.names
    with ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(lambda h: install_driver(lab_hosts, h), hosts))
    prom_port, exporter_port = prometheus
    exporter = start_exporter(lab_hosts.inventory_path, exporter_port, tmp_path / "state")
    gone = hosts[-1]
    try:
        until(lambda: len(query(prom_port, "gpunode_host_up == 1")) == len(hosts), 90, "all up")
        lab_hosts.fault(gone, "refuse")
        lab_hosts.fault(gone, "drop", "0")
        until(
            lambda: (
                [s["metric"]["Hostname"] for s in query(prom_port, "gpunode_host_up == 0")]
                == [gone]
            ),
            60,
            f"{gone} down in Prometheus",
        )
        left = {s["metric"]["Hostname"] for s in query(prom_port, "DCGM_FI_DEV_GPU_TEMP")}
        assert left == set(hosts) - {gone}
    finally:
        exporter.terminate()
        exporter.communicate(timeout=30)
        lab_hosts.fault(gone, "drop", off=True)
        lab_hosts.fault(gone, "refuse", off=True)
