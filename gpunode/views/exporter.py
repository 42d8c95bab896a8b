"""`gpunode exporter`'s metrics: the monitor's board and the run records, as Prometheus
families, served over HTTP or written for node_exporter's textfile collector.

It only reads: the board the sampler keeps, and the records on this controller. No
secret is in either (records hold none), and host names, GPU models and UUIDs are all a
metric carries.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpunode.monitor.board import HostView
from gpunode.views.gpumetrics import Names, dcgm_labels, family, gpu_families, live_gpus
from gpunode.views.hoststate import RunRecords, smoke_figures, xid_key

TEXTFILE = "gpunode.prom"


def _gauge(name: str, help_text: str) -> Metric:
    return family(name, help_text, "gauge")


class FleetCollector(Collector):
    """Collected at every scrape: GPU families from the board's views, host families from
    the board and the newest run records of this inventory (`runs` reads its records alone;
    `label` names it in the `inventory` label). `target` limits one collection to one host
    (`/metrics?target=HOST`)."""

    def __init__(
        self,
        views: Callable[[], Sequence[HostView]],
        hosts: Sequence[str],
        *,
        names: Names = "dcgm",
        runs: RunRecords | None = None,
        label: str = "",
    ) -> None:
        self.views = views
        self.hosts = list(hosts)
        self.names = names
        self.runs = runs or RunRecords()
        self.label = label
        self.target: str | None = None

    def for_target(self, target: str | None) -> FleetCollector:
        """The same fleet seen through one host (None: all of them)."""
        one = FleetCollector(
            self.views, self.hosts, names=self.names, runs=self.runs, label=self.label
        )
        one.target = target
        return one

    def collect(self) -> Iterator[Metric]:
        views = [v for v in self.views() if self.target in (None, v.name)]
        hosts = [h for h in self.hosts if self.target in (None, h)]
        yield from gpu_families(views, self.names, self.label)
        if self.names == "dcgm":
            yield self.xid_family(views)
        yield from self.host_families(views, hosts)

    def xid_family(self, views: Sequence[HostView]) -> Metric:
        """DCGM_FI_DEV_XID_ERRORS: each GPU's last Xid, from the host's newest doctor run (the
        kernel log is read there, with the rights it needs); no sample before a doctor run."""
        name = "DCGM_FI_DEV_XID_ERRORS"
        fam = _gauge(name, "Value of the last XID error encountered.")
        states = self.runs.states(v.name for v in views)
        for host, sample in live_gpus(views):
            xids = states[host].xids
            if xids is not None:
                value = float(xids.get(xid_key(sample.bus_id), 0))
                fam.add_sample(name, dcgm_labels(host, sample, self.label), value)
        return fam

    def host_families(self, views: Iterable[HostView], hosts: Sequence[str]) -> list[Metric]:
        def add(fam: Metric, host: str, value: float, **more: str) -> None:
            fam.add_sample(fam.name, {"Hostname": host, "inventory": self.label, **more}, value)

        up = _gauge("gpunode_host_up", "1 while the host's GPU samples arrive.")
        for v in views:
            add(up, v.name, 1.0 if v.link == "live" else 0.0)
        conv = _gauge(
            "gpunode_host_converged",
            "1 when the host's last apply (or apply --check) left nothing to change.",
        )
        pending = _gauge(
            "gpunode_changes_pending", "Changes the host's last apply planned and did not make."
        )
        last = _gauge(
            "gpunode_last_apply_timestamp_seconds",
            "When the last apply (not --check) that reached the host finished.",
        )
        result = _gauge("gpunode_smoke_result", "Last smoke test result: 1 pass, 0.5 warn, 0 fail.")
        tflops = _gauge("gpunode_smoke_matmul_tflops", "Last smoke matmul TFLOP/s.")
        copy = _gauge(
            "gpunode_smoke_copy_bandwidth_bytes_per_second",
            "Last smoke device-copy bandwidth (read and write counted).",
        )
        busbw = _gauge(
            "gpunode_smoke_allreduce_bus_bandwidth_bytes_per_second",
            "Last smoke NCCL all-reduce bus bandwidth, by message size.",
        )
        doctor = _gauge(
            "gpunode_doctor_findings",
            "Findings of the host's last gpunode doctor run, by severity.",
        )
        out = [up, conv, pending, last, result, tflops, copy, busbw, doctor]
        if self.target is None:  # the controller's own: in the whole fleet's scrape only
            runs = _gauge(
                "gpunode_runs",
                "Run records of this inventory on this controller by status "
                "(abandoned: its controller process died).",
            )
            for status, n in sorted(self.runs.statuses().items()):
                runs.add_sample(runs.name, {"inventory": self.label, "status": status}, float(n))
            out.append(runs)
        for host, st in self.runs.states(hosts).items():
            if st.converged is not None:
                add(conv, host, 1.0 if st.converged else 0.0)
                add(pending, host, float(st.changes_pending or 0))
            if st.last_apply is not None:
                add(last, host, st.last_apply)
            for sev, n in sorted((st.findings or {}).items()):
                add(doctor, host, float(n), severity=sev)
            if st.smoke is None:
                continue
            fig = smoke_figures(st.smoke)
            for test, value in sorted(fig.results.items()):
                add(result, host, value, test=test)
            for dtype, value in sorted(fig.matmul_tflops.items()):
                add(tflops, host, value, dtype=dtype)
            if fig.copy_bytes_per_second is not None:
                add(copy, host, fig.copy_bytes_per_second)
            for size, value in sorted(fig.allreduce_bytes_per_second.items()):
                add(busbw, host, value, size=size)
        return out


def service_discovery(hosts: Sequence[str], inventory: str) -> list[dict[str, object]]:
    """Prometheus's http_sd_config JSON: one target per host (its name; the scrape config
    puts it in `?target=` and in `instance`, docs/monitoring.md). The inventory goes as a
    meta label, which relabeling may use and which is dropped after: the metrics carry
    their own `inventory` label."""
    return (
        [{"targets": list(hosts), "labels": {"__meta_gpunode_inventory": inventory}}]
        if hosts
        else []
    )


def registry_for(collector: FleetCollector) -> CollectorRegistry:
    """A registry of the fleet alone: none of the exporter process's own metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The Prometheus text format (0.0.4) of everything in `registry`, each sample under
    its own name: a counter keeps its dcgm-exporter name, without `_total`."""
    out: list[str] = []
    for fam in registry.collect():
        out.append(f"# HELP {fam.name} {_escape(fam.documentation, quote=False)}\n")
        out.append(f"# TYPE {fam.name} {fam.type}\n")
        for s in fam.samples:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels.items())
            out.append(f"{s.name}{{{labels}}} {_number(s.value)}\n")
    return "".join(out).encode("utf-8")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(text: str, *, quote: bool = True) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


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
