"""Where samples come from: NVML in this process, or nvidia-smi streaming over a Transport.

A source's `stream` blocks for as long as the host keeps sending and raises
(or returns) when the stream ends; the sampler reconnects.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from gpunode.monitor.board import GPUS_MAX
from gpunode.monitor.model import GpuProcess, GpuSample
from gpunode.monitor.parse import (
    BASE_FIELDS,
    QUERY_FIELDS,
    DmonParser,
    LineSplitter,
    dmon_command,
    parse_apps,
    parse_gpu_line,
    parse_ps_users,
    query_apps_command,
    query_gpu_command,
)
from gpunode.transport.base import Transport
from gpunode.transport.ring import keeping

STREAM_KEPT = 64 << 10
"""What a stream keeps of its own output (each of stdout and stderr): its rows are parsed as
they come, and only the end says why it stopped. The transport's default (4 MiB) filled at
the 1.6 KiB/s of an 8-GPU host grew a 10-host `top` by a mebibyte a minute for an hour."""

SamplesSink = Callable[[Sequence[GpuSample]], None]
ProcessesSink = Callable[[Sequence[GpuProcess]], None]


class StreamEnded(Exception):
    """The host stopped sending: the command exited or the connection broke."""


class GpusUnreadable(StreamEnded):
    """The host answered but nvidia-smi could not read its GPUs (no driver, a version
    mismatch, a lost GPU): the link works, the GPUs do not."""


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


class EnergyMeter:
    """Energy as a counter where nvidia-smi has no energy field: each GPU's power summed
    over the time between its samples (mJ since this meter started); a gap longer than
    `max_gap` (a stream that dropped) adds nothing rather than a guess."""

    def __init__(self, max_gap: float) -> None:
        self.max_gap = max_gap
        self._last: dict[str, tuple[float, float]] = {}  # uuid -> (ts, W)
        self._total: dict[str, float] = {}

    def add(self, sample: GpuSample) -> GpuSample:
        if sample.energy_mj is not None or sample.power_draw_w is None:
            return sample
        key = sample.uuid or str(sample.index)
        if key not in self._last and len(self._last) >= GPUS_MAX:
            return sample  # a GPU a host invents past any machine's count: not metered
        total = self._total.get(key, 0.0)
        last = self._last.get(key)
        if last is not None and 0 < sample.ts - last[0] <= self.max_gap:
            total += (last[1] + sample.power_draw_w) / 2 * (sample.ts - last[0]) * 1000
        self._last[key] = (sample.ts, sample.power_draw_w)
        self._total[key] = total
        return sample.model_copy(update={"energy_mj": total})


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
        dmon: bool = False,
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
        self.fields: tuple[str, ...] = QUERY_FIELDS
        self.dmon = dmon
        self._dmon_values: dict[int, dict[str, float]] = {}
        self.energy = EnergyMeter(max_gap=max(5.0, 5 * interval))

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
                sample = parse_gpu_line(line, self.host, now, self.fields)
                if sample is not None:
                    if sample.uuid in self._uuids or len(self._uuids) < GPUS_MAX:
                        self._uuids[sample.uuid] = sample.index
                    extra = self._dmon_values.get(sample.index)
                    if extra:
                        sample = sample.model_copy(update=extra)
                    batch.append(self.energy.add(sample))
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
        dmon = threading.Thread(
            target=self._dmon, args=(stop, done), name=f"gpu-dmon-{self.host}", daemon=True
        )
        if self.dmon:
            dmon.start()
        try:
            for fields in (QUERY_FIELDS, BASE_FIELDS):
                self.fields = fields
                with keeping(STREAM_KEPT):
                    result = self.transport.run(
                        query_gpu_command(max(100, int(self.interval * 1000)), fields),
                        on_output=on_output,
                        timeout=None,
                    )
                # An older driver refuses a field of the wider query: ask for the base alone.
                if "is not a valid field" not in result.stdout + result.stderr:
                    break
        finally:
            done.set()
        if self.quiet_reason:
            raise StreamEnded(self.quiet_reason)
        if not stop.is_set():
            out = result.stderr.strip() or result.stdout.strip()
            why = (out.splitlines() or [f"exit {result.exit_code}"])[-1]
            if 0 <= result.exit_code < 255:  # nvidia-smi's own status: the host answered
                raise GpusUnreadable(f"nvidia-smi: {why}")
            raise StreamEnded(f"nvidia-smi ended: {why}")

    def _dmon(self, stop: threading.Event, done: threading.Event) -> None:
        """What `--query-gpu` lacks, from a second stream (`nvidia-smi dmon`) on the same
        connection, merged into the next samples. Best effort: a driver or GPU without it
        (no GPM before Hopper, no --gpm-metrics in old drivers) leaves those values out."""
        parser = DmonParser()
        splitter = LineSplitter()

        def on_output(stream: Literal["stdout", "stderr"], chunk: str) -> None:
            if stop.is_set() or done.is_set():
                raise Stopped
            if stream != "stdout":
                return
            for line in splitter.feed(chunk):
                row = parser.feed(line)
                # as the board: GPUs a host invents past GPUS_MAX are not kept
                if row is not None and (
                    row[0] in self._dmon_values or len(self._dmon_values) < GPUS_MAX
                ):
                    self._dmon_values[row[0]] = row[1]

        with contextlib.suppress(Exception), keeping(STREAM_KEPT):  # failures never shown
            self.transport.run(dmon_command(self.interval), on_output=on_output, timeout=None)

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
                # A failure here shows up on the stream too: report it once, there. Any
                # failure: a link cut by a reboot raises EOFError from paramiko, and a
                # traceback of this thread must never reach the terminal.
                with contextlib.suppress(Exception):
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
