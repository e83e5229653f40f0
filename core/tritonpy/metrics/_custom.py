"""Families that backends and models define (``tritonpy_sdk.host.MetricRegistry``) as exposition families."""

from __future__ import annotations

from tritonpy_sdk import MetricKind
from tritonpy_sdk.host import MetricRegistry

from ._exposition import Family

#: Families of the process, not of one server: ``tritonpy.MetricFamily`` (``tritonserver``'s
#: in-process custom metrics) makes them, and every server in the process reports them.
PROCESS_METRICS = MetricRegistry()


def custom_families(registry: MetricRegistry) -> list[Family]:
    """The families of ``registry``; histogram bounds printed as Triton's
    prometheus-cpp prints them (C's ``%.16g``: ``le="1"``, ``le="2.5"``, ``le="1e-05"``)."""
    out: list[Family] = []
    for family in registry.families():
        rendered = Family(family.name, family.description, family.kind.value)
        for metric in family.metrics():
            if family.kind is MetricKind.HISTOGRAM:
                buckets, total, count = metric.histogram()
                for bound, cumulative in buckets:
                    le = "+Inf" if bound == float("inf") else format(float(bound), ".16g")
                    rendered.add({**metric.labels, "le": le}, cumulative, "_bucket")
                rendered.add(metric.labels, total, "_sum")
                rendered.add(metric.labels, count, "_count")
            else:
                rendered.add(metric.labels, metric.value())
        out.append(rendered)
    return out
