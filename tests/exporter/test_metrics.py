"""The exporter's families from a board and from run records (no hosts, no server)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import click
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpunode.cli.exporter import parse_listen
from gpunode.execute.result import ChangeResult, HostResult
from gpunode.monitor import Board
from gpunode.monitor.parse import BASE_FIELDS, parse_gpu_line
from gpunode.views.exporter import FleetCollector, exposition, registry_for, write_textfile
from gpunode.views.hoststate import RunRecords

FIXTURES = Path(__file__).parent.parent / "fixtures" / "monitor"
CAPTURE = ("index", "uuid", "name", "driver_version", "pci.bus_id", "memory.total",
           "memory.used", "memory.free", "utilization.gpu", "utilization.memory",
           "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "clocks.mem")  # fmt: skip


def board_from_capture(host: str = "h200-a") -> Board:
    """A board fed the real 2x H200 capture, in the monitor's own field order."""
    board = Board([host, "quiet"], clock=lambda: 100.0)
    for line in (FIXTURES / "h200x2-query-gpu.csv").read_text().splitlines():
        row = dict(zip(CAPTURE, (p.strip() for p in line.split(",")), strict=False))
        sample = parse_gpu_line(", ".join(row[f] for f in BASE_FIELDS), host, 99.0, BASE_FIELDS)
        assert sample is not None
        board.add_samples(host, [sample])
    return board


def samples(text: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text.decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def collect(board: Board, runs: Path, names: str = "dcgm") -> dict[str, Any]:
    """Every sample; the `inventory` label checked on each and left out."""
    c = FleetCollector(board.views, board.hosts, names=names, runs=RunRecords(runs),  # type: ignore[arg-type]
                       label="prod")  # fmt: skip
    got = samples(exposition(registry_for(c)))
    for series in got.values():
        for labels, _ in series:
            assert labels.pop("inventory") == "prod"
    return got


def test_dcgm_names_and_labels_from_the_real_capture(tmp_path: Path) -> None:
    got = collect(board_from_capture(), tmp_path)
    temps = got["DCGM_FI_DEV_GPU_TEMP"]
    assert [v for _, v in temps] == [36.0, 35.0]
    assert temps[0][0] == {
        "gpu": "0",
        "UUID": "GPU-4535bd70-a68d-8e9d-5e87-ae20fb0ab3da",
        "pci_bus_id": "00000000:00:06.0",
        "device": "nvidia0",
        "modelName": "NVIDIA H200",
        "Hostname": "h200-a",
        "DCGM_FI_DRIVER_VERSION": "580.159.04",
    }
    assert [v for _, v in got["DCGM_FI_DEV_FB_FREE"]] == [143156.0, 143156.0]
    assert [v for _, v in got["DCGM_FI_DEV_MEM_CLOCK"]] == [3201.0, 3201.0]
    assert [v for _, v in got["DCGM_FI_DEV_POWER_USAGE"]] == [83.46, 80.07]
    # The host that never sent a sample: down, and no GPU series of it.
    assert sorted((lab["Hostname"], v) for lab, v in got["gpunode_host_up"]) == [
        ("h200-a", 1.0),
        ("quiet", 0.0),
    ]
    assert all(lab["Hostname"] == "h200-a" for lab, _ in got["DCGM_FI_DEV_GPU_UTIL"])


def test_simple_names(tmp_path: Path) -> None:
    got = collect(board_from_capture(), tmp_path, names="simple")
    assert "DCGM_FI_DEV_GPU_UTIL" not in got
    assert got["gpu_temperature"][1] == ({"Hostname": "h200-a", "gpu_id": "1"}, 35.0)
    assert [v for _, v in got["gpu_usage_percent"]] == [0.0, 0.0]
    assert "gpu_memory_usage" in {f.name for f in text_string_to_metric_families(
        exposition(registry_for(FleetCollector(board_from_capture().views, [], names="simple"))
                   ).decode())}  # fmt: skip


def write_record(runs: Path, rid: str, hosts: dict[str, Any], **top: Any) -> None:
    runs.mkdir(parents=True, exist_ok=True)
    doc = {"id": rid, "command": "apply", "status": "finished", "finished": 1700000000.0,
           "options": {"check": False}, "hosts": hosts, **top}  # fmt: skip
    (runs / f"{rid}.json").write_text(json.dumps(doc))


def host_json(status: str, planned: int, done: int, smoke: Any = None) -> dict[str, Any]:
    plan = {"changes": [{"title": f"c{i}"} for i in range(planned)]}
    changes = [
        ChangeResult("t", "r", "op", "why", "changed" if i < done else "failed", 0.1)
        for i in range(max(done, 1 if status == "failed" else 0))
    ]
    r = HostResult("x", status=status, plans=[plan], changes=changes, smoke=smoke)  # type: ignore[arg-type]
    return r.to_json()


SMOKE = {
    "host": "a", "status": "ok", "unreachable": None, "seconds": 9.0,
    "counts": {"pass": 3, "warn": 0, "fail": 1, "skip": 1},
    "results": [
        {"name": "torch/matmul-bf16", "status": "pass", "value": 702.1,
         "details": {"metric": "bf16_tflops"}},
        {"name": "torch/copy", "status": "pass", "value": 4.29, "details": {"metric": "copy_tbs"}},
        {"name": "nccl-allreduce/256MiB", "status": "fail", "value": 324.0,
         "details": {"metric": "allreduce_busbw_gbs"}},
        {"name": "tensorflow", "status": "skip", "value": None},
    ],
}  # fmt: skip


def test_host_state_from_the_newest_records(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_record(runs, "20260101T000000-aaaaaa",
                 {"a": host_json("changed", 5, 5, SMOKE), "b": host_json("failed", 4, 1)},
                 finished=1000.0)  # fmt: skip
    write_record(runs, "20260102T000000-bbbbbb", {"a": host_json("changed", 2, 0)},
                 options={"check": True}, finished=2000.0)  # fmt: skip
    write_record(runs, "20260103T000000-cccccc", {"b": {"status": "waiting"}}, status="running")
    write_record(runs, "20260104T000000-dddddd",
                 {"a": {"findings": [{"severity": "error"}, {"severity": "error"},
                                     {"severity": "info"}]}}, command="doctor")  # fmt: skip
    board = Board(["a", "b", "c"])
    got = collect(board, runs)
    pick = lambda name: {tuple(sorted(lab.items())): v for lab, v in got.get(name, [])}  # noqa: E731
    # a: its newest apply was --check with 2 changes to make; its last real apply at 1000.
    assert pick("gpunode_host_converged") == {(("Hostname", "a"),): 0.0, (("Hostname", "b"),): 0.0}
    assert pick("gpunode_changes_pending") == {(("Hostname", "a"),): 2.0, (("Hostname", "b"),): 3.0}
    assert pick("gpunode_last_apply_timestamp_seconds") == {
        (("Hostname", "a"),): 1000.0,
        (("Hostname", "b"),): 1000.0,
    }
    assert pick("gpunode_smoke_result") == {
        (("Hostname", "a"), ("test", "torch/matmul-bf16")): 1.0,
        (("Hostname", "a"), ("test", "torch/copy")): 1.0,
        (("Hostname", "a"), ("test", "nccl-allreduce/256MiB")): 0.0,
    }
    assert pick("gpunode_smoke_matmul_tflops") == {(("Hostname", "a"), ("dtype", "bf16")): 702.1}
    assert pick("gpunode_smoke_copy_bandwidth_bytes_per_second") == {(("Hostname", "a"),): 4.29e12}
    assert pick("gpunode_smoke_allreduce_bus_bandwidth_bytes_per_second") == {
        (("Hostname", "a"), ("size", "256MiB")): 324e9
    }
    assert pick("gpunode_doctor_findings") == {
        (("Hostname", "a"), ("severity", "error")): 2.0,
        (("Hostname", "a"), ("severity", "info")): 1.0,
    }
    # A newer real apply that converged a host wins over everything older.
    write_record(runs, "20260105T000000-eeeeee", {"a": host_json("ok", 0, 0)}, finished=3000.0)
    got = collect(board, runs)
    assert pick("gpunode_host_converged")[(("Hostname", "a"),)] == 1.0
    assert pick("gpunode_changes_pending")[(("Hostname", "a"),)] == 0.0
    assert pick("gpunode_last_apply_timestamp_seconds")[(("Hostname", "a"),)] == 3000.0


def test_no_records_no_host_series_but_every_family_is_there(tmp_path: Path) -> None:
    text = exposition(registry_for(FleetCollector(Board(["a"]).views, ["a"],
                                                  runs=RunRecords(tmp_path))))  # fmt: skip
    assert b"# TYPE gpunode_doctor_findings gauge" in text
    assert b"gpunode_doctor_findings{" not in text
    assert b'gpunode_host_up{Hostname="a",inventory=""} 0.0' in text


def test_textfile_is_replaced_whole_and_world_readable(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        reg = registry_for(FleetCollector(board_from_capture().views, ["h200-a"],
                                          runs=RunRecords(tmp_path / "none")))  # fmt: skip
        path = write_textfile(tmp_path, reg)
        first = path.stat().st_ino
        write_textfile(tmp_path, reg)
    finally:
        os.umask(old)  # the session's own, not 022: later tests run under what CI gave
    assert path.name == "gpunode.prom" and path.stat().st_ino != first  # renamed over it
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["gpunode.prom"]
    assert "DCGM_FI_DEV_GPU_TEMP" in samples(path.read_bytes())


@pytest.mark.parametrize(
    ("text", "want"),
    [("127.0.0.1:10140", ("127.0.0.1", 10140)), ("[::1]:80", ("::1", 80)),
     ("0.0.0.0:1", ("0.0.0.0", 1))],
)  # fmt: skip
def test_listen(text: str, want: tuple[str, int]) -> None:
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", ["9835", ":9835", "host:", "host:0", "host:70000", "h:-1"])
def test_listen_refused(text: str) -> None:
    with pytest.raises(click.BadParameter, match="ADDR:PORT"):
        parse_listen(text)


def test_the_last_xid_per_gpu_comes_from_the_newest_doctor_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    board = board_from_capture()
    assert collect(board, runs).get("DCGM_FI_DEV_XID_ERRORS") is None  # no doctor run yet
    line = "May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:00:07): {}, GPU has fallen off the bus."
    xid = [{"rule": "gpu.xid", "severity": "error", "evidence": line.format(code)}
           for code in (48, 79)]  # fmt: skip
    write_record(runs, "20260104T000000-dddddd", {"h200-a": {"findings": xid}},
                 command="doctor")  # fmt: skip
    got = collect(board, runs)["DCGM_FI_DEV_XID_ERRORS"]
    assert sorted((lab["pci_bus_id"], v) for lab, v in got) == [
        ("00000000:00:06.0", 0.0),
        ("00000000:00:07.0", 79.0),  # the last of the kernel log's lines for that GPU
    ]
