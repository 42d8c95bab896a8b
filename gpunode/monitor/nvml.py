"""This machine's GPUs through NVML (nvidia-ml-py), no subprocess at all: the monitor's
local path, reading what DCGM reads where NVML has it (docs/monitoring.md lists the rest).

Memory is NVML's v2 call, as nvidia-smi and DCGM count it: the driver's reserved share is
neither used nor free (v1 counts it as used: 615 MiB "used" on an idle H200 that
nvidia-smi shows at 0 MiB).
"""

from __future__ import annotations

import os
import pwd
import threading
import time
from collections.abc import Callable
from typing import Any

from gpunode.monitor.model import GpuProcess, GpuSample
from gpunode.monitor.sources import ProcessesSink, SamplesSink

MIB = 1024 * 1024


class NvmlSource:
    """This machine's GPUs through NVML, read every `interval` seconds."""

    name = "nvml"

    def __init__(
        self, host: str, *, interval: float = 1.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.host = host
        self.interval = interval
        self.clock = clock
        self._gpm: dict[int, Any] = {}  # index -> the previous GPM sample (two make a reading)

    @staticmethod
    def available() -> bool:
        try:
            import pynvml

            pynvml.nvmlInit()
            pynvml.nvmlShutdown()
        except Exception:  # no library, no driver, no GPU: all mean "use nvidia-smi"
            return False
        return True

    def stream(
        self, on_samples: SamplesSink, on_processes: ProcessesSink, stop: threading.Event
    ) -> None:
        import pynvml

        pynvml.nvmlInit()
        try:
            tick = 0
            while not stop.is_set():
                handles = [
                    pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
                ]
                now = self.clock()
                on_samples([self._sample(pynvml, i, h, now) for i, h in enumerate(handles)])
                if tick % 5 == 0:
                    on_processes(self._processes(pynvml, handles))
                tick += 1
                stop.wait(self.interval)
        finally:
            self._free_gpm(pynvml)
            pynvml.nvmlShutdown()

    def _sample(self, nv: Any, index: int, h: Any, now: float) -> GpuSample:
        def get(fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except (nv.NVMLError, AttributeError, TypeError):  # not on this GPU or binding
                return None

        util = get(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        mem = get(lambda: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2))
        reserved = None if mem is None else int(mem.reserved // MIB)
        if mem is None:  # a driver before v2: used then counts the reserved share too
            mem = get(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        power = get(lambda: nv.nvmlDeviceGetPowerUsage(h))
        limit = get(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        remap = get(lambda: nv.nvmlDeviceGetRemappedRows(h))  # (corr, unc, pending, failure)
        tx = get(lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES))
        rx = get(lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES))
        enc = get(lambda: nv.nvmlDeviceGetEncoderUtilization(h))
        dec = get(lambda: nv.nvmlDeviceGetDecoderUtilization(h))
        gpm = self._gpm_reading(nv, index, h)

        def ecc(corrected: bool, aggregate: bool) -> int | None:
            def read() -> int:
                kind = "CORRECTED" if corrected else "UNCORRECTED"
                counter = nv.NVML_AGGREGATE_ECC if aggregate else nv.NVML_VOLATILE_ECC
                error = getattr(nv, f"NVML_MEMORY_ERROR_TYPE_{kind}")
                return int(nv.nvmlDeviceGetTotalEccErrors(h, error, counter))

            return get(read)  # type: ignore[no-any-return]

        return GpuSample(
            host=self.host,
            index=index,
            name=_text(get(lambda: nv.nvmlDeviceGetName(h))),
            uuid=_text(get(lambda: nv.nvmlDeviceGetUUID(h))),
            bus_id=_text(get(lambda: nv.nvmlDeviceGetPciInfo(h).busId)),
            driver_version=_text(get(nv.nvmlSystemGetDriverVersion)),
            memory_total_mib=None if mem is None else int(mem.total // MIB),
            memory_used_mib=None if mem is None else int(mem.used // MIB),
            memory_free_mib=None if mem is None else int(mem.free // MIB),
            memory_reserved_mib=reserved,
            utilization_pct=None if util is None else float(util.gpu),
            memory_utilization_pct=None if util is None else float(util.memory),
            encoder_utilization_pct=None if enc is None else float(enc[0]),
            decoder_utilization_pct=None if dec is None else float(dec[0]),
            temperature_c=get(
                lambda: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
            ),
            memory_temperature_c=get(lambda: _memory_temp(nv, h)),
            power_draw_w=None if power is None else power / 1000.0,
            power_limit_w=None if limit is None else limit / 1000.0,
            energy_mj=get(lambda: float(nv.nvmlDeviceGetTotalEnergyConsumption(h))),
            sm_clock_mhz=get(lambda: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))),
            mem_clock_mhz=get(lambda: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))),
            clocks_event_reasons=get(lambda: int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))),
            ecc_sbe_volatile=ecc(corrected=True, aggregate=False),
            ecc_dbe_volatile=ecc(corrected=False, aggregate=False),
            ecc_sbe_aggregate=ecc(corrected=True, aggregate=True),
            ecc_dbe_aggregate=ecc(corrected=False, aggregate=True),
            remapped_rows_correctable=None if remap is None else int(remap[0]),
            remapped_rows_uncorrectable=None if remap is None else int(remap[1]),
            remapped_rows_failure=None if remap is None else bool(remap[3]),
            pcie_replay_count=get(lambda: int(nv.nvmlDeviceGetPcieReplayCounter(h))),
            pcie_tx_bytes_per_second=None if tx is None else tx * 1024.0,  # NVML says KB/s
            pcie_rx_bytes_per_second=None if rx is None else rx * 1024.0,
            gr_engine_active=gpm.get("gr"),
            tensor_active=gpm.get("tensor"),
            dram_active=gpm.get("dram"),
            ts=now,
        )

    def _gpm_reading(self, nv: Any, index: int, h: Any) -> dict[str, float]:
        """DCGM's profiling ratios from NVML's GPM (Hopper and newer): each reading is
        the difference of two samples, this one and the previous tick's."""
        try:
            sample = nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(h, sample)
        except Exception:  # no GPM on this GPU, driver or binding: no profiling ratios
            return {}
        previous, self._gpm[index] = self._gpm.get(index), sample
        if previous is None:
            return {}
        ids = {
            "gr": nv.NVML_GPM_METRIC_GRAPHICS_UTIL,
            "tensor": nv.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
            "dram": nv.NVML_GPM_METRIC_DRAM_BW_UTIL,
        }
        try:
            req = nv.c_nvmlGpmMetricsGet_t()
            req.version = nv.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = len(ids)
            req.sample1, req.sample2 = previous, sample
            for i, metric in enumerate(ids.values()):
                req.metrics[i].metricId = metric
            nv.nvmlGpmMetricsGet(req)
        except Exception:
            return {}
        finally:
            nv.nvmlGpmSampleFree(previous)
        # GPM says percent; DCGM's PROF fields are ratios.
        return {k: req.metrics[i].value / 100.0 for i, k in enumerate(ids)}

    def _free_gpm(self, nv: Any) -> None:
        for sample in self._gpm.values():
            try:
                nv.nvmlGpmSampleFree(sample)
            except Exception:
                continue
        self._gpm.clear()

    def _processes(self, nv: Any, handles: list[Any]) -> list[GpuProcess]:
        out: list[GpuProcess] = []
        for index, h in enumerate(handles):
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except nv.NVMLError:
                continue
            for p in procs:
                user, command = "", ""
                try:
                    with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                        command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                    user = pwd.getpwuid(os.stat(f"/proc/{p.pid}").st_uid).pw_name
                except (OSError, KeyError):
                    pass
                used = p.usedGpuMemory
                out.append(
                    GpuProcess(
                        host=self.host,
                        gpu=index,
                        pid=int(p.pid),
                        user=user,
                        used_mem=int(used // MIB) if used else None,
                        command=command,
                    )
                )
        return out

    def close(self) -> None:
        pass


def _memory_temp(nv: Any, h: Any) -> float:
    (field,) = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_MEMORY_TEMP])
    return float(field.value.uiVal)


def _text(value: Any) -> str:
    """NVML's strings: bytes from older bindings, str from newer ones."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value or "")
