"""Where samples come from: NVML in this process, or nvidia-smi streaming over a Transport.

A source's `stream` blocks for as long as the host keeps sending and raises
(or returns) when the stream ends; the sampler reconnects.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from gpunode.monitor.model import GpuProcess, GpuSample
from gpunode.monitor.parse import (
    LineSplitter,
    parse_apps,
    parse_gpu_line,
    parse_ps_users,
    query_apps_command,
    query_gpu_command,
)
from gpunode.transport.base import Transport, TransportError

SamplesSink = Callable[[Sequence[GpuSample]], None]
ProcessesSink = Callable[[Sequence[GpuProcess]], None]


class StreamEnded(Exception):
    """The host stopped sending: the command exited or the connection broke."""


class Stopped(Exception):
    """Raised inside an output callback to abandon a stream the sampler no longer wants."""


class Source(Protocol):
    name: str  # "nvml" or "nvidia-smi"

    def stream(
        self,
        on_samples: SamplesSink,
        on_processes: ProcessesSink,
        stop: threading.Event,
    ) -> None: ...

    def close(self) -> None: ...


class SmiSource:
    """One long-lived `nvidia-smi --query-gpu ... -lms N` per host, parsed as it streams.

    Processes come from a short `--query-compute-apps` every `process_every`
    seconds on a helper thread (a second channel on the same connection); None reads none.
    """

    name = "nvidia-smi"

    def __init__(
        self,
        host: str,
        transport: Transport,
        *,
        interval: float = 1.0,
        process_every: float | None = 5.0,
        quiet_limit: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.host = host
        self.quiet_limit = quiet_limit
        self._last_output = time.monotonic()
        self.quiet_reason = ""
        self.transport = transport
        self.interval = interval
        self.process_every = process_every
        self.clock = clock
        self._uuids: dict[str, int] = {}

    def stream(
        self, on_samples: SamplesSink, on_processes: ProcessesSink, stop: threading.Event
    ) -> None:
        self.transport.connect()
        splitter = LineSplitter()
        batch: list[GpuSample] = []

        def on_output(stream: Literal["stdout", "stderr"], chunk: str) -> None:
            if stop.is_set():
                raise Stopped
            self._last_output = time.monotonic()
            if stream != "stdout":
                return
            now = self.clock()
            for line in splitter.feed(chunk):
                sample = parse_gpu_line(line, self.host, now)
                if sample is not None:
                    self._uuids[sample.uuid] = sample.index
                    batch.append(sample)
            if batch:
                on_samples(list(batch))
                batch.clear()

        done = threading.Event()
        self._last_output = time.monotonic()
        self.quiet_reason = ""
        poller = threading.Thread(
            target=self._poll_processes,
            args=(on_processes, stop, done),
            name=f"gpu-procs-{self.host}",
            daemon=True,
        )
        poller.start()
        try:
            result = self.transport.run(
                query_gpu_command(max(100, int(self.interval * 1000))),
                on_output=on_output,
                timeout=None,
            )
        finally:
            done.set()
        if self.quiet_reason:
            raise StreamEnded(self.quiet_reason)
        if not stop.is_set():
            why = (result.stderr.strip().splitlines() or [f"exit {result.exit_code}"])[-1]
            raise StreamEnded(f"nvidia-smi ended: {why}")

    def _poll_processes(
        self, on_processes: ProcessesSink, stop: threading.Event, done: threading.Event
    ) -> None:
        next_poll = 0.0
        while not (stop.is_set() or done.is_set()):
            now = time.monotonic()
            if now - self._last_output > self.quiet_limit:
                # A link that died silently never ends the read: close it so the stream
                # returns and the sampler reconnects.
                self.quiet_reason = f"no output for {self.quiet_limit:g}s"
                with contextlib.suppress(Exception):
                    self.transport.close()
                return
            if self.process_every is not None and now >= next_poll:
                next_poll = now + self.process_every
                # A failure here shows up on the stream too: report it once, there.
                with contextlib.suppress(TransportError, OSError):
                    on_processes(self.processes())
            # Without processes to read, only the silence check wakes it: a fifth of its limit.
            done.wait(min(1.0, self.process_every) if self.process_every else self.quiet_limit / 5)

    def processes(self) -> list[GpuProcess]:
        apps = self.transport.run(query_apps_command(), timeout=30)
        if not apps.ok:
            return []
        procs = parse_apps(apps.stdout, self.host, self._uuids, {})
        pids = sorted({p.pid for p in procs})
        if not pids:
            return procs
        ps = self.transport.run(
            ["ps", "-o", "pid=,user=", "-p", ",".join(map(str, pids))], timeout=30
        )
        users = parse_ps_users(ps.stdout)
        return parse_apps(apps.stdout, self.host, self._uuids, users)

    def close(self) -> None:
        self.transport.close()


class NvmlSource:
    """This machine's GPUs through NVML (nvidia-ml-py), no subprocess at all."""

    name = "nvml"

    def __init__(
        self, host: str, *, interval: float = 1.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.host = host
        self.interval = interval
        self.clock = clock

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
            pynvml.nvmlShutdown()

    def _sample(self, nv: Any, index: int, h: Any, now: float) -> GpuSample:
        def get(fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except nv.NVMLError:
                return None

        util = get(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        mem = get(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        power = get(lambda: nv.nvmlDeviceGetPowerUsage(h))
        limit = get(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        mib = 1024 * 1024
        return GpuSample(
            host=self.host,
            index=index,
            name=str(get(lambda: nv.nvmlDeviceGetName(h)) or ""),
            uuid=str(get(lambda: nv.nvmlDeviceGetUUID(h)) or ""),
            util=float(util.gpu) if util is not None else None,
            mem_used=int(mem.used // mib) if mem is not None else None,
            mem_total=int(mem.total // mib) if mem is not None else None,
            temp=get(lambda: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))),
            power_draw=power / 1000.0 if power is not None else None,
            power_limit=limit / 1000.0 if limit is not None else None,
            sm_clock=get(lambda: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))),
            ts=now,
            driver=_text(get(nv.nvmlSystemGetDriverVersion)),
            mem_free=int(mem.free // mib) if mem is not None else None,
            mem_clock=get(lambda: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))),
            bus_id=_text(get(lambda: nv.nvmlDeviceGetPciInfo(h).busId)),
        )

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
                        used_mem=int(used // (1024 * 1024)) if used else None,
                        command=command,
                    )
                )
        return out

    def close(self) -> None:
        pass


def _text(value: Any) -> str:
    """NVML's strings: bytes from older bindings, str from newer ones."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value or "")
