"""`gpunode exporter`'s metrics: the monitor's board and the run records, as Prometheus
families, served over HTTP or written for node_exporter's textfile collector.

It only reads: the board the sampler keeps, and the records on this controller. No
secret is in either (records hold none), and host names, GPU models and UUIDs are all a
metric carries.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from gpunode.monitor.board import HostView
from gpunode.views.gpumetrics import DCGM_LABELS, Names, dcgm_labels, gpu_families, live_gpus
from gpunode.views.hoststate import RunRecords, smoke_figures, xid_key

TEXTFILE = "gpunode.prom"


def _gauge(name: str, help_text: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, labels=list(labels))


class FleetCollector(Collector):
    """Collected at every scrape: GPU families from the board's views, host families from
    the board and the newest run records."""

    def __init__(
        self,
        views: Callable[[], Sequence[HostView]],
        hosts: Sequence[str],
        *,
        names: Names = "dcgm",
        runs: RunRecords | None = None,
    ) -> None:
        self.views = views
        self.hosts = list(hosts)
        self.names = names
        self.runs = runs or RunRecords()

    def collect(self) -> Iterator[Metric]:
        views = list(self.views())
        yield from gpu_families(views, self.names)
        if self.names == "dcgm":
            yield self.xid_family(views)
        yield from self.host_families(views)

    def xid_family(self, views: Sequence[HostView]) -> Metric:
        """DCGM_FI_DEV_XID_ERRORS: each GPU's last Xid, from the host's newest doctor run (the
        kernel log is read there, with the rights it needs); no sample before a doctor run."""
        family = GaugeMetricFamily(
            "DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.",
            labels=DCGM_LABELS,
        )  # fmt: skip
        states = self.runs.states(v.name for v in views)
        for host, sample in live_gpus(views):
            xids = states[host].xids
            if xids is not None:
                family.add_metric(
                    dcgm_labels(host, sample), float(xids.get(xid_key(sample.bus_id), 0))
                )
        return family

    def host_families(self, views: Iterable[HostView]) -> list[Metric]:
        up = _gauge("gpunode_host_up", "1 while the host's GPU samples arrive.", ["host"])
        for v in views:
            up.add_metric([v.name], 1.0 if v.link == "live" else 0.0)
        conv = _gauge(
            "gpunode_host_converged",
            "1 when the host's last apply (or apply --check) left nothing to change.",
            ["host"],
        )
        pending = _gauge(
            "gpunode_changes_pending",
            "Changes the host's last apply planned and did not make.",
            ["host"],
        )
        last = _gauge(
            "gpunode_last_apply_timestamp_seconds",
            "When the last apply (not --check) that reached the host finished.",
            ["host"],
        )
        result = _gauge(
            "gpunode_smoke_result", "Last smoke test result: 1 pass, 0.5 warn, 0 fail.",
            ["host", "test"],
        )  # fmt: skip
        tflops = _gauge(
            "gpunode_smoke_matmul_tflops", "Last smoke matmul TFLOP/s.", ["host", "dtype"]
        )
        copy = _gauge(
            "gpunode_smoke_copy_bandwidth_bytes_per_second",
            "Last smoke device-copy bandwidth (read and write counted).",
            ["host"],
        )
        busbw = _gauge(
            "gpunode_smoke_allreduce_bus_bandwidth_bytes_per_second",
            "Last smoke NCCL all-reduce bus bandwidth, by message size.",
            ["host", "size"],
        )
        doctor = _gauge(
            "gpunode_doctor_findings",
            "Findings of the host's last gpunode doctor run, by severity.",
            ["host", "severity"],
        )
        runs = _gauge(
            "gpunode_runs",
            "Run records on this controller by status (abandoned: its controller process died).",
            ["status"],
        )
        for status, n in sorted(self.runs.statuses().items()):
            runs.add_metric([status], float(n))
        for host, st in self.runs.states(self.hosts).items():
            if st.converged is not None:
                conv.add_metric([host], 1.0 if st.converged else 0.0)
                pending.add_metric([host], float(st.changes_pending or 0))
            if st.last_apply is not None:
                last.add_metric([host], st.last_apply)
            for sev, n in sorted((st.findings or {}).items()):
                doctor.add_metric([host, sev], float(n))
            if st.smoke is None:
                continue
            fig = smoke_figures(st.smoke)
            for test, value in sorted(fig.results.items()):
                result.add_metric([host, test], value)
            for dtype, value in sorted(fig.matmul_tflops.items()):
                tflops.add_metric([host, dtype], value)
            if fig.copy_bytes_per_second is not None:
                copy.add_metric([host], fig.copy_bytes_per_second)
            for size, value in sorted(fig.allreduce_bytes_per_second.items()):
                busbw.add_metric([host, size], value)
        return [up, conv, pending, last, result, tflops, copy, busbw, doctor, runs]


def registry_for(collector: FleetCollector) -> CollectorRegistry:
    """A registry of the fleet alone: none of the exporter process's own metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The Prometheus text format of everything in `registry`."""
    return generate_latest(registry)


def write_textfile(directory: Path, registry: CollectorRegistry) -> Path:
    """Write gpunode.prom into `directory` atomically (a temporary file renamed over it),
    world-readable so node_exporter can read it; a reader never sees half a file."""
    path = directory / TEXTFILE
    tmp = directory / f".{TEXTFILE}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(exposition(registry))
        os.chmod(tmp, 0o644)  # whatever the umask
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path
