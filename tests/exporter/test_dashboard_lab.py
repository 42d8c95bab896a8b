"""dcgm-exporter's own Grafana dashboard on gpunode's exporter, unchanged: a real Prometheus
finds the lab hosts through the exporter's /targets (one target per host, multi-target
relabeling as docs/monitoring.md gives it), and every panel's query, with the dashboard's
variables filled in as Grafana fills them, returns data."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab, until
from tests.exporter.test_prometheus_lab import (
    free_port,
    pristine_after,
    prometheus_or_skip,
    query,
    serving,
    start_exporter,
)
from tests.tui.test_lab_tmux import install_driver

pytestmark = [pytest.mark.lab, pytest.mark.slow]
__all__ = ["pristine_after"]  # the fixture, imported to be used here

DASHBOARD = Path(__file__).parent.parent / "fixtures" / "grafana" / "dcgm-exporter-dashboard.json"
# What Grafana puts for its own variables (none of this dashboard's queries use a range).
BUILTIN = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "5m"}


def scrape_config(exporter_port: int) -> str:
    """docs/monitoring.md's multi-target job, pointed at the test's exporter."""
    exporter = f"127.0.0.1:{exporter_port}"
    return (
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: gpunode\n"
        f"    http_sd_configs: [{{url: 'http://{exporter}/targets', refresh_interval: 2s}}]\n"
        "    relabel_configs:\n"
        "      - {source_labels: [__address__], target_label: __param_target}\n"
        "      - {source_labels: [__param_target], target_label: instance}\n"
        f"      - {{target_label: __address__, replacement: '{exporter}'}}\n"
    )


@pytest.fixture
def multi_target_prometheus(tmp_path: Path) -> Iterator[tuple[int, int]]:
    prometheus_or_skip()
    exporter_port, port = free_port(), free_port()
    with serving(tmp_path, scrape_config(exporter_port), port):
        yield port, exporter_port


def label_values(port: int, label: str, match: str) -> list[str]:
    """Grafana's label_values(METRIC, LABEL), through Prometheus's label API."""
    url = f"http://127.0.0.1:{port}/api/v1/label/{label}/values?" + urllib.parse.urlencode(
        {"match[]": match}
    )
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.loads(r.read())
    return sorted(doc["data"])


def fill(expr: str, variables: dict[str, list[str]]) -> str:
    """A panel's query with its variables as Grafana writes them for Prometheus: a multi-value
    variable as a regex alternation of its values, each escaped."""
    for name, values in variables.items():
        alternation = "(" + "|".join(re.escape(v).replace("\\", "\\\\") for v in values) + ")"
        expr = expr.replace(f"${name}", alternation).replace(f"${{{name}}}", alternation)
    for name, value in BUILTIN.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"a variable left unfilled: {expr}"
    return expr


def panels(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, query) of every panel, rows' panels included."""
    out = []
    for p in doc["panels"]:
        for inner in [p, *p.get("panels", [])]:
            for t in inner.get("targets", []):
                if t.get("expr"):
                    out.append((str(inner.get("title")), str(t["expr"])))
    return out


def test_every_panel_of_dcgm_exporters_dashboard_returns_data(
    lab_hosts: Lab,
    multi_target_prometheus: tuple[int, int],
    tmp_path: Path,
    pristine_after: None,
) -> None:
    hosts = lab_hosts.names
    with ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(lambda h: install_driver(lab_hosts, h), hosts))
    for host in hosts:  # GPUs at work: the tensor panel has something to show
        lab_hosts.fault(host, "load", "busy")
    doc = json.loads(DASHBOARD.read_text())
    queries = panels(doc)
    assert len(queries) == 8  # the dashboard as fetched: every panel is checked below
    prom_port, exporter_port = multi_target_prometheus
    exporter = start_exporter(lab_hosts.inventory_path, exporter_port, tmp_path / "state")
    try:
        # One target per host, named for it: `instance` is the host.
        until(
            lambda: label_values(prom_port, "instance", "DCGM_FI_DEV_GPU_TEMP") == sorted(hosts),
            90,
            "a target per lab host in Prometheus",
        )
        variables = {
            "instance": label_values(prom_port, "instance", "DCGM_FI_DEV_GPU_TEMP"),
            "gpu": label_values(prom_port, "gpu", "DCGM_FI_DEV_GPU_TEMP"),
        }
        assert variables["gpu"] == ["0", "1"]
        empty: list[str] = []

        def every_panel_has_data() -> bool:
            empty[:] = [t for t, e in queries if not query(prom_port, fill(e, variables))]
            return not empty

        until(every_panel_has_data, 60, f"data in every panel (still empty: {empty})")
        up = query(prom_port, 'up{job="gpunode"}')
        temps = query(prom_port, "DCGM_FI_DEV_GPU_TEMP")
    finally:
        exporter.terminate()
        _, err = exporter.communicate(timeout=30)
    assert sorted((s["metric"]["instance"], s["value"][1]) for s in up) == [
        (h, "1") for h in sorted(hosts)
    ]
    # Each host's series carry its own name in both labels, and only its own GPUs.
    assert all(s["metric"]["instance"] == s["metric"]["Hostname"] for s in temps)
    assert len(temps) == 2 * len(hosts), err
