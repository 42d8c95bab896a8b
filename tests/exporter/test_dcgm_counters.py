"""dcgm-exporter's counters from both paths, on what a real idle H200 said (driver 580.159.04):
nvidia-smi's wider query (remote path) and NVML's memory calls (local path) give the same
FB_USED as nvidia-smi, 0 MiB, with the driver's reserved share as FB_RESERVED."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from gpunode.monitor import Board
from gpunode.monitor.nvml import NvmlSource
from gpunode.monitor.parse import QUERY_FIELDS, parse_gpu_line
from gpunode.monitor.sources import EnergyMeter
from gpunode.smiquery import header_names
from gpunode.views.exporter import FleetCollector, exposition, registry_for
from gpunode.views.hoststate import RunRecords

FIXTURES = Path(__file__).parent.parent / "fixtures" / "monitor"
MEMORY = json.loads((FIXTURES / "h200-nvml-memory.json").read_text())


def remote_sample() -> Any:
    header, row = (FIXTURES / "h200-query-gpu-dcgm-header.csv").read_text().splitlines()
    names = header_names(header)
    assert names is not None
    line = (FIXTURES / "h200-query-gpu-dcgm.csv").read_text().splitlines()[0]
    sample = parse_gpu_line(line, "remote", 10.0, names)
    assert sample is not None
    assert parse_gpu_line(row, "remote", 10.0, names) is not None  # with units, the same
    return sample


class FakeNvml(SimpleNamespace):
    """pynvml's calls that `NvmlSource` makes for memory and identity, with the bytes
    pynvml returned on the H200; every other call is missing (AttributeError: no value)."""

    class NVMLError(Exception):
        pass

    nvmlMemory_v2 = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, v2: bool = True) -> None:
        super().__init__()
        self.v2 = v2

    def nvmlDeviceGetMemoryInfo(self, h: Any, version: int | None = None) -> Any:
        if version is not None and not self.v2:
            raise self.NVMLError("Function Not Found")
        return SimpleNamespace(**MEMORY["v2" if version else "v1"])

    def nvmlDeviceGetName(self, h: Any) -> str:
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return "GPU-bec9a296-29c1-e727-7fe5-3bab525160ee"

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.159.04"

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Any) -> int:
        return 2749076  # mJ, as the probe read it

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return 78120


def local_sample(v2: bool = True) -> Any:
    return NvmlSource("local")._sample(FakeNvml(v2), 0, object(), 10.0)


def metrics(*samples: Any) -> dict[str, list[tuple[dict[str, str], float, str]]]:
    board = Board([s.host for s in samples], clock=lambda: 10.0)
    for s in samples:
        board.add_samples(s.host, [s])
    text = exposition(registry_for(FleetCollector(board.views, board.hosts, runs=RunRecords())))
    assert b"_total" not in text  # counters keep dcgm-exporter's names
    out: dict[str, list[tuple[dict[str, str], float, str]]] = {}
    for fam in text_string_to_metric_families(text.decode()):
        for s in fam.samples:  # the parser names a counter's samples NAME_total
            out.setdefault(s.name.removesuffix("_total"), []).append((s.labels, s.value, fam.type))
    return out


def values(got: dict[str, Any], name: str) -> dict[str, float]:
    return {labels["Hostname"]: value for labels, value, _ in got[name]}


def test_fb_used_agrees_with_nvidia_smi_on_both_paths() -> None:
    got = metrics(remote_sample(), local_sample())
    # nvidia-smi said memory.used 0 MiB, memory.reserved 616 MiB, memory.free 143156 MiB;
    # NVML v2 says 0 used, 644939776 bytes (615 MiB) reserved.
    assert values(got, "DCGM_FI_DEV_FB_USED") == {"remote": 0.0, "local": 0.0}
    assert values(got, "DCGM_FI_DEV_FB_RESERVED") == {"remote": 616.0, "local": 615.0}
    assert values(got, "DCGM_FI_DEV_FB_FREE") == {"remote": 143156.0, "local": 143155.0}


def test_without_nvmls_v2_call_used_counts_the_reserved_share() -> None:
    # What the exporter reported before: v1's used is the reserved 615 MiB on an idle GPU.
    s = local_sample(v2=False)
    assert (s.memory_used_mib, s.memory_reserved_mib) == (615, None)


def test_the_wider_query_gives_dcgm_counters_and_the_driver_label() -> None:
    assert set(header_names(",".join(QUERY_FIELDS)) or ()) == set(QUERY_FIELDS)
    got = metrics(remote_sample())
    labels, _, _ = got["DCGM_FI_DEV_GPU_TEMP"][0]
    assert labels["DCGM_FI_DRIVER_VERSION"] == "580.159.04"
    assert labels["UUID"] == "GPU-bec9a296-29c1-e727-7fe5-3bab525160ee"
    assert values(got, "DCGM_FI_DEV_MEMORY_TEMP") == {"remote": 39.0}
    assert values(got, "DCGM_FI_DEV_MEM_COPY_UTIL") == {"remote": 0.0}
    assert values(got, "DCGM_FI_DEV_ENC_UTIL") == {"remote": 0.0}
    assert values(got, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS") == {"remote": 0.0}
    assert values(got, "DCGM_FI_DEV_ROW_REMAP_FAILURE") == {"remote": 0.0}
    assert values(got, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") == {"remote": 0.0}
    # What nvidia-smi's query cannot give has no series (docs/monitoring.md says why).
    assert "DCGM_FI_DEV_PCIE_REPLAY_COUNTER" not in got
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" not in got


def test_energy_is_a_counter_under_dcgm_exporters_name() -> None:
    got = metrics(local_sample())
    ((_, value, kind),) = got["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    assert (value, kind) == (2749076.0, "counter")


def test_the_remote_path_sums_power_into_energy() -> None:
    meter = EnergyMeter(max_gap=5.0)
    base = remote_sample()
    first = meter.add(base.model_copy(update={"ts": 0.0, "power_draw_w": 100.0}))
    second = meter.add(base.model_copy(update={"ts": 2.0, "power_draw_w": 300.0}))
    gap = meter.add(base.model_copy(update={"ts": 60.0, "power_draw_w": 300.0}))
    # (100 W + 300 W) / 2 over 2 s = 400 J; a minute's gap adds nothing, and it never falls.
    assert (first.energy_mj, second.energy_mj, gap.energy_mj) == (0.0, 400_000.0, 400_000.0)


def test_nvml_source_streams_until_stopped(monkeypatch: Any) -> None:
    fake = FakeNvml()
    fake.nvmlInit = fake.nvmlShutdown = lambda: None
    fake.nvmlDeviceGetCount = lambda: 1
    fake.nvmlDeviceGetHandleByIndex = lambda i: object()
    fake.nvmlDeviceGetComputeRunningProcesses = lambda h: []
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    stop = threading.Event()
    got: list[Any] = []

    def on_samples(samples: Any) -> None:
        got.extend(samples)
        stop.set()

    NvmlSource("me", interval=0.01).stream(on_samples, lambda p: None, stop)
    assert got[0].memory_used_mib == 0 and got[0].driver_version == "580.159.04"
