"""The nvidia-smi CSV parser, against lines captured on real H200 machines."""

from __future__ import annotations

from pathlib import Path

from gpunode.monitor.parse import (
    BASE_FIELDS,
    QUERY_FIELDS,
    DmonParser,
    LineSplitter,
    dmon_command,
    parse_apps,
    parse_gpu_line,
    parse_ps_users,
    query_gpu_command,
)
from tests.smi_readers import CAPTURE_FIELDS

FIXTURES = Path(__file__).parent.parent / "fixtures" / "monitor"


def test_parses_real_single_gpu_capture() -> None:
    line = (FIXTURES / "h200-query-gpu.csv").read_text().splitlines()[0]
    s = parse_gpu_line(line, "h1", 5.0, CAPTURE_FIELDS)
    assert s is not None
    assert (s.host, s.index, s.name) == ("h1", 0, "NVIDIA H200")
    assert s.uuid == "GPU-a6e89c80-9928-a727-7385-cf717c71b09b"
    assert (s.utilization_pct, s.memory_used_mib, s.memory_total_mib) == (0.0, 0, 143771)
    assert (s.temperature_c, s.power_draw_w, s.power_limit_w) == (40.0, 129.36, 700.0)
    assert s.sm_clock_mhz == 1980
    assert s.ts == 5.0


def test_parses_real_two_gpu_capture_in_the_monitor_field_order() -> None:
    lines = (FIXTURES / "h200x2-query-gpu.csv").read_text().splitlines()
    # Re-order the captured values into the monitor's own query, as nvidia-smi would print them.
    rows = [
        dict(zip(CAPTURE_FIELDS, (p.strip() for p in ln.split(",")), strict=True)) for ln in lines
    ]
    ours = [", ".join(r[f] for f in BASE_FIELDS) for r in rows]
    samples = [parse_gpu_line(ln, "h2", 1.0, BASE_FIELDS) for ln in ours]
    assert [s.index for s in samples if s] == [0, 1]
    assert [s.power_draw_w for s in samples if s] == [83.46, 80.07]
    assert [s.sm_clock_mhz for s in samples if s] == [345, 345]
    assert [s.driver_version for s in samples if s] == ["580.159.04", "580.159.04"]
    assert [(s.memory_free_mib, s.mem_clock_mhz) for s in samples if s] == [(143156, 3201)] * 2
    assert [s.bus_id for s in samples if s] == ["00000000:00:06.0", "00000000:00:07.0"]


def test_missing_values_are_none() -> None:
    line = (
        "3, NVIDIA H200, GPU-x, [N/A], 10, 143771, [Not Supported], [N/A], 700.00, [N/A], [N/A],"
        " [N/A], [N/A], [N/A]"
    )
    s = parse_gpu_line(line, "h", 0.0, BASE_FIELDS)
    assert s is not None and s.driver_version == ""
    assert s.utilization_pct is None and s.temperature_c is None
    assert s.power_draw_w is None and s.sm_clock_mhz is None
    assert s.memory_used_mib == 10 and s.power_limit_w == 700.0
    assert s.memory_free_mib is None and s.mem_clock_mhz is None and s.bus_id == ""


def test_ignores_headers_errors_and_short_lines() -> None:
    header = (FIXTURES / "h200-query-gpu-header.csv").read_text().splitlines()[0]
    assert parse_gpu_line(header, "h", 0.0) is None
    assert parse_gpu_line("", "h", 0.0) is None
    assert parse_gpu_line("NVIDIA-SMI has failed because it couldn't communicate", "h", 0) is None
    bad_index = "x, NVIDIA H200, GPU-x, 1, 1, 1, 1, 1, 1, 1"
    assert parse_gpu_line(bad_index, "h", 0.0) is None


def test_line_splitter_joins_chunks_split_anywhere() -> None:
    sp = LineSplitter()
    assert list(sp.feed("0, a")) == []
    assert list(sp.feed("b\r\n1, c\n2")) == ["0, ab", "1, c"]
    assert list(sp.feed("\n")) == ["2"]


def test_stream_command_asks_for_every_field_and_the_interval() -> None:
    argv = query_gpu_command(500)
    assert argv[1] == "--query-gpu=" + ",".join(QUERY_FIELDS)
    assert argv[-2:] == ["-lms", "500"]


def test_processes_get_gpu_index_and_user() -> None:
    text = "GPU-b, 4242, 1024, python train.py --lr=0.1,0.2\nGPU-z, 7, [N/A], x\ngarbage\n"
    users = parse_ps_users("  4242 alice\n   7 root\nnot a line\n")
    procs = parse_apps(text, "h", {"GPU-b": 1}, users)
    assert [(p.gpu, p.pid, p.user, p.used_mem) for p in procs] == [
        (1, 4242, "alice", 1024),
        (-1, 7, "root", None),
    ]
    assert procs[0].command == "python train.py --lr=0.1,0.2"


def test_dmon_rows_from_a_real_h200() -> None:
    # `nvidia-smi dmon --gpm-metrics 5 -s t -d 1`: GPM has no value on its first tick.
    parser = DmonParser()
    rows = [parser.feed(ln) for ln in (FIXTURES / "h200-dmon-gpm.txt").read_text().splitlines()]
    got = [r for r in rows if r is not None]
    assert got[0] == (0, {"pcie_rx_bytes_per_second": 0.0, "pcie_tx_bytes_per_second": 0.0})
    assert got[1][1]["pcie_tx_bytes_per_second"] == 1e6  # 1 MB/s
    assert got[2][1]["tensor_active"] == 0.0
    assert dmon_command(0.4)[-2:] == ["-d", "1"]  # dmon's delay is whole seconds
