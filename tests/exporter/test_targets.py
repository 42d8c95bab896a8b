"""One target per host (`/metrics?target=HOST`, `/targets`), and each inventory's own run
records: two inventories that both have a `lab-01` never show each other's."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpunode import records
from gpunode.execute.result import HostResult
from gpunode.inventory.loader import load
from gpunode.monitor import Board
from gpunode.views.exporter import FleetCollector
from gpunode.views.exporthttp import ExporterServer
from gpunode.views.hoststate import RunRecords
from tests.exporter.test_metrics import board_from_capture


def inventory(path: Path, name: str | None) -> Path:
    head = f"name: {name}\n" if name else ""
    path.write_text(
        head + "hosts:\n  lab-01: {address: 127.0.0.1}\n  lab-02: {address: 127.0.0.1}\n"
    )
    return path


def apply_record(inv: Path, status: str) -> None:
    """An apply of `inv` that left lab-01 `status` (changed: converged; failed: not)."""
    rec = records.Record("apply", load(inv).identity, {"check": False})
    plan = {"changes": [{"title": "c0"}]}
    entry = HostResult("lab-01", status=status, plans=[plan]).to_json()  # type: ignore[arg-type]
    rec.finish({"lab-01": entry}, 0 if status == "changed" else 2, 1.0)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def series(text: str, name: str) -> dict[str, float]:
    return {
        s.labels["Hostname"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name
    }


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUNODE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_two_inventories_with_the_same_host_names_never_mix(tmp_path: Path, state: Path) -> None:
    prod = inventory(tmp_path / "prod.yaml", "prod")
    staging = inventory(tmp_path / "staging.yaml", None)
    apply_record(prod, "changed")  # prod's lab-01 converged
    apply_record(staging, "failed")  # staging's lab-01 did not, later
    for inv, want in ((prod, 1.0), (staging, 0.0)):
        ident = load(inv).identity
        collector = FleetCollector(
            Board(["lab-01"]).views, ["lab-01"], runs=RunRecords(inventory=ident), label=ident.label
        )
        text = b"".join(
            f"{s.name} {s.value}\n".encode() for m in collector.collect() for s in m.samples
            if s.name == "gpunode_host_converged"
        ).decode()  # fmt: skip
        assert text == f"gpunode_host_converged {want}\n", inv
        assert [r["inventory"] for r in records.runs_of(ident)] == [str(inv.resolve())]
    assert load(prod).identity.label == "prod"
    assert load(staging).identity.label == str(staging.resolve())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    board = board_from_capture("lab-01")  # lab-01 live with two GPUs; "quiet" never answered
    collector = FleetCollector(
        board.views, ["lab-01", "quiet"], runs=RunRecords(tmp_path / "none"), label="prod"
    )
    srv = ExporterServer(collector, ("127.0.0.1", 0))
    srv.start()
    try:
        yield f"http://127.0.0.1:{srv.port}"
    finally:
        srv.shutdown()


def test_one_target_per_host(server: str) -> None:
    status, body = get(server + "/targets")
    assert status == 200
    assert json.loads(body) == [
        {"targets": ["lab-01", "quiet"], "labels": {"__meta_gpunode_inventory": "prod"}}
    ]
    _, everything = get(server + "/metrics")
    assert series(everything, "gpunode_host_up") == {"lab-01": 1.0, "quiet": 0.0}
    assert "gpunode_runs" in everything
    status, one = get(server + "/metrics?target=quiet")
    assert status == 200
    assert series(one, "gpunode_host_up") == {"quiet": 0.0}
    assert series(one, "DCGM_FI_DEV_GPU_TEMP") == {}  # lab-01's GPUs are not quiet's
    assert "gpunode_runs" not in one  # the controller's own: in the whole fleet's scrape
    _, lab = get(server + "/metrics?target=lab-01")
    temps: Any = [
        s
        for f in text_string_to_metric_families(lab)
        for s in f.samples
        if s.name == "DCGM_FI_DEV_GPU_TEMP"
    ]
    assert sorted(s.labels["gpu"] for s in temps) == ["0", "1"]
    assert {s.labels["Hostname"] for s in temps} == {"lab-01"}


@pytest.mark.parametrize(
    "query", ["target=lab-03", "target=lab-01&target=quiet", "target=", "target=lab-01%0a"]
)
def test_a_target_not_of_the_inventory_is_refused(server: str, query: str) -> None:
    status, body = get(f"{server}/metrics?{query}")
    assert status == 404 and "target: not a host of this exporter's inventory" in body
