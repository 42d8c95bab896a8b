"""GPU samples as Prometheus metric families: dcgm-exporter's names, or the simple ones.

The dcgm names, types and help texts follow NVIDIA dcgm-exporter's etc/default-counters.csv
(every counter nvidia-smi's query or NVML can give; docs/monitoring.md lists the others and
why), and the labels its GPU template renders (internal/pkg/rendermetrics/render_metrics.go:
gpu, UUID, pci_bus_id, device="nvidiaN", modelName, Hostname, and the driver's version as
the DCGM_FI_DRIVER_VERSION label), so dashboards made for dcgm-exporter read these series
unchanged; `inventory` says which inventory the host is of. Only hosts whose samples are
live are shown: a host gone quiet has no GPU series (gpunode_host_up says why), as a dead
dcgm-exporter would have none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import Metric

from gpunode.monitor.board import HostView
from gpunode.monitor.model import GpuSample

Names = Literal["dcgm", "simple"]
Kind = Literal["gauge", "counter"]

DCGM_LABELS = (
    "gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION",
    "inventory",
)  # fmt: skip
SIMPLE_LABELS = ("Hostname", "gpu_id", "inventory")


@dataclass(frozen=True)
class Field:
    name: str
    help: str
    value: Callable[[GpuSample], float | int | bool | None]
    kind: Kind = "gauge"


# default-counters.csv's order and help texts; counters are counters there too.
DCGM_FIELDS: tuple[Field, ...] = (
    Field("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda s: s.sm_clock_mhz),
    Field("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", lambda s: s.mem_clock_mhz),
    Field("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).",
          lambda s: s.memory_temperature_c),
    Field("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda s: s.temperature_c),
    Field("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda s: s.power_draw_w),
    Field("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
          lambda s: s.energy_mj, "counter"),
    Field("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.",
          lambda s: s.pcie_replay_count, "counter"),
    Field("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda s: s.utilization_pct),
    Field("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).",
          lambda s: s.memory_utilization_pct),
    Field("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).",
          lambda s: s.encoder_utilization_pct),
    Field("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).",
          lambda s: s.decoder_utilization_pct),
    Field("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", lambda s: s.memory_free_mib),
    Field("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda s: s.memory_used_mib),
    Field("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).",
          lambda s: s.memory_reserved_mib),
    Field("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
          lambda s: s.ecc_sbe_volatile, "counter"),
    Field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
          lambda s: s.ecc_dbe_volatile, "counter"),
    Field("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors.",
          lambda s: s.ecc_sbe_aggregate, "counter"),
    Field("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors.",
          lambda s: s.ecc_dbe_aggregate, "counter"),
    Field("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
          "Number of remapped rows for uncorrectable errors",
          lambda s: s.remapped_rows_uncorrectable, "counter"),
    Field("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors",
          lambda s: s.remapped_rows_correctable, "counter"),
    Field("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed",
          lambda s: s.remapped_rows_failure),
    Field("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event reasons (bit mask).",
          lambda s: s.clocks_event_reasons),
    Field("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.",
          lambda s: s.gr_engine_active),
    Field("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.",
          lambda s: s.tensor_active),
    Field("DCGM_FI_PROF_DRAM_ACTIVE",
          "Ratio of cycles the device memory interface is active sending or receiving data.",
          lambda s: s.dram_active),
    Field("DCGM_FI_PROF_PCIE_TX_BYTES",
          "The rate of data transmitted over the PCIe bus - including both protocol headers "
          "and data payloads - in bytes per second.", lambda s: s.pcie_tx_bytes_per_second),
    Field("DCGM_FI_PROF_PCIE_RX_BYTES",
          "The rate of data received over the PCIe bus - including both protocol headers and "
          "data payloads - in bytes per second.", lambda s: s.pcie_rx_bytes_per_second),
)  # fmt: skip

SIMPLE_FIELDS: tuple[Field, ...] = (
    Field("gpu_usage_percent", "GPU utilisation (in %).", lambda s: s.utilization_pct),
    Field("gpu_memory_usage", "GPU memory used (in MB).", lambda s: _mb(s.memory_used_mib)),
    Field("gpu_temperature", "GPU temperature (in C).", lambda s: s.temperature_c),
)


def _mb(mib: int | None) -> float | None:
    return None if mib is None else round(mib * 1.048576, 3)


def family(name: str, help_text: str, kind: Kind = "gauge") -> Metric:
    """A family whose samples keep `name` as it is: a counter too (prometheus_client would
    add `_total`, which dcgm-exporter's names and dashboards do not have)."""
    return Metric(name, help_text, kind)


def dcgm_labels(host: str, s: GpuSample, inventory: str) -> dict[str, str]:
    values = (str(s.index), s.uuid, s.bus_id, f"nvidia{s.index}", s.name, host,
              s.driver_version, inventory)  # fmt: skip
    return dict(zip(DCGM_LABELS, values, strict=True))


def _simple_labels(host: str, s: GpuSample, inventory: str) -> dict[str, str]:
    return dict(zip(SIMPLE_LABELS, (host, str(s.index), inventory), strict=True))


def live_gpus(views: Iterable[HostView]) -> Iterator[tuple[str, GpuSample]]:
    """(host, sample) for every GPU of every host whose samples are arriving."""
    for view in views:
        if view.link != "live":
            continue
        for index in sorted(view.gpus):
            yield view.name, view.gpus[index]


def gpu_families(views: Sequence[HostView], names: Names, inventory: str) -> list[Metric]:
    """One family per field; a value the GPU (or the path it was read by) does not give
    has no sample."""
    fields, label_of = (
        (DCGM_FIELDS, dcgm_labels) if names == "dcgm" else (SIMPLE_FIELDS, _simple_labels)
    )
    gpus = list(live_gpus(views))
    out: list[Metric] = []
    for field in fields:
        fam = family(field.name, field.help, field.kind)
        for host, sample in gpus:
            value = field.value(sample)
            if value is not None:
                fam.add_sample(field.name, label_of(host, sample, inventory), float(value))
        out.append(fam)
    return out
