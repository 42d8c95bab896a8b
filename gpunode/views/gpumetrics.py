"""GPU samples as Prometheus metric families: dcgm-exporter's names, or the simple ones.

The dcgm names, types and units follow NVIDIA dcgm-exporter's etc/default-counters.csv,
and the labels its GPU template renders (internal/pkg/rendermetrics/render_metrics.go:
gpu, UUID, pci_bus_id, device="nvidiaN", modelName, Hostname), so dashboards made for
dcgm-exporter read these series unchanged. Only hosts whose samples are live are shown:
a host gone quiet has no GPU series (gpunode_host_up says why), as a dead dcgm-exporter
would have none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import GaugeMetricFamily, Metric

from gpunode.monitor.board import HostView
from gpunode.monitor.model import GpuSample

Names = Literal["dcgm", "simple"]
NAMES: tuple[Names, ...] = ("dcgm", "simple")

DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
SIMPLE_LABELS = ("host", "gpu_id")


@dataclass(frozen=True)
class Field:
    name: str
    help: str
    value: Callable[[GpuSample], float | int | None]


# Help texts as default-counters.csv words them.
DCGM_FIELDS: tuple[Field, ...] = (
    Field("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda s: s.sm_clock),
    Field("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", lambda s: s.mem_clock),
    Field("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda s: s.temp),
    Field("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda s: s.power_draw),
    Field("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda s: s.util),
    Field("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", lambda s: s.mem_free),
    Field("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda s: s.mem_used),
)

SIMPLE_FIELDS: tuple[Field, ...] = (
    Field("gpu_usage_percent", "GPU utilisation (in %).", lambda s: s.util),
    Field("gpu_memory_usage", "GPU memory used (in MB).", lambda s: _mb(s.mem_used)),
    Field("gpu_temperature", "GPU temperature (in C).", lambda s: s.temp),
)


def _mb(mib: int | None) -> float | None:
    return None if mib is None else round(mib * 1.048576, 3)


def dcgm_labels(host: str, s: GpuSample) -> list[str]:
    return [str(s.index), s.uuid, s.bus_id, f"nvidia{s.index}", s.name, host]


def _simple_labels(host: str, s: GpuSample) -> list[str]:
    return [host, str(s.index)]


def live_gpus(views: Iterable[HostView]) -> Iterator[tuple[str, GpuSample]]:
    """(host, sample) for every GPU of every host whose samples are arriving."""
    for view in views:
        if view.link != "live":
            continue
        for index in sorted(view.gpus):
            yield view.name, view.gpus[index]


def gpu_families(views: Sequence[HostView], names: Names = "dcgm") -> list[Metric]:
    """One gauge family per field; a value the GPU does not report has no sample."""
    fields, labels, label_of = (
        (DCGM_FIELDS, DCGM_LABELS, dcgm_labels)
        if names == "dcgm"
        else (SIMPLE_FIELDS, SIMPLE_LABELS, _simple_labels)
    )
    gpus = list(live_gpus(views))
    out: list[Metric] = []
    for field in fields:
        family = GaugeMetricFamily(field.name, field.help, labels=labels)
        for host, sample in gpus:
            value = field.value(sample)
            if value is not None:
                family.add_metric(label_of(host, sample), float(value))
        out.append(family)
    return out
