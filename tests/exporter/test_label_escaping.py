"""Host data in a label (a GPU name, a host's message) cannot add a line or a metric to
the exposition: quotes, backslashes and newlines are escaped, and Prometheus's own parser
reads back exactly the value written, one sample, nothing injected."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from gpunode.views.exporter import exposition

HOSTILE = 'H200"} 1\nDCGM_FI_DEV_GPU_TEMP{gpu="0"} 999\n# \\ "'


class _One(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        fam = GaugeMetricFamily("gpunode_test", "help with a\nnewline", labels=["modelName"])
        fam.add_metric([HOSTILE], 1.0)
        yield fam


def test_a_hostile_label_value_is_escaped_and_reads_back_whole() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_One())
    text = exposition(registry).decode()
    assert text.count("\n") == 3  # HELP, TYPE, one sample: no line of the value's own
    (family,) = text_string_to_metric_families(text)
    (sample,) = family.samples
    assert sample.labels == {"modelName": HOSTILE} and sample.value == 1.0
