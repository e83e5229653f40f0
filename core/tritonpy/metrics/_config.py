"""``--metrics-config key=value`` settings, as tritonserver names them."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_BUCKETS_US = (100.0, 500.0, 1_000.0, 5_000.0, 10_000.0, 50_000.0, 100_000.0, 500_000.0, 1_000_000.0)
DEFAULT_QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)

#: The stages of a request that latency summaries and histograms measure.
STAGES = ("request", "queue", "compute_input", "compute_infer", "compute_output")
#: Triton's histogram (``histogram_latencies=true``): a request's first response, in ms.
FIRST_RESPONSE = "nv_inference_first_response_histogram_ms"


def stage_histogram(stage: str) -> str:
    """tritonpy's own histogram family of one stage, in microseconds (Triton has none)."""
    return f"tritonpy_inference_{stage}_histogram_us"


#: The families whose buckets a model's ``model_metrics { metric_control }`` may set.
CUSTOMIZABLE = frozenset({FIRST_RESPONSE, *(stage_histogram(stage) for stage in STAGES)})


def not_customizable(families: list[str]) -> list[str]:
    """Triton's warning for each family of a model's ``metric_control`` that is not one of
    ``CUSTOMIZABLE`` (the model loads; the setting is ignored)."""
    return [
        f"Metric family '{family}' in 'metric_identifier' is not a customizable metric in Triton core."
        for family in families
        if family not in CUSTOMIZABLE
    ]


def _bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"--metrics-config {key} expects true or false, got '{value}'")


@dataclass
class MetricsConfig:
    """What the model metrics include.

    - ``counter_latencies`` (default true): the ``*_duration_us`` counters;
    - ``summary_latencies`` (default false): ``*_summary_us`` summaries with
      ``summary_quantiles`` over the last ``summary_max_age_ms``;
    - ``histogram_latencies`` (default false): Triton's
      ``nv_inference_first_response_histogram_ms``, and tritonpy's own
      ``tritonpy_inference_*_histogram_us`` histograms with ``histogram_buckets_us``
      (a model's ``model_metrics`` may override the buckets of a family).
    """

    counter_latencies: bool = True
    summary_latencies: bool = False
    summary_quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    summary_max_age_ms: int = 60_000
    histogram_latencies: bool = False
    histogram_buckets_us: tuple[float, ...] = DEFAULT_BUCKETS_US
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, items: list[str]) -> MetricsConfig:
        """From ``key=value`` strings; ValueError naming a malformed one."""
        config = cls()
        for item in items:
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise ValueError(f"--metrics-config expects key=value, got '{item}'")
            if key in ("counter_latencies", "summary_latencies", "histogram_latencies"):
                setattr(config, key, _bool(key, value))
            elif key == "summary_quantiles":
                # Triton's form is "0.5:0.05,0.9:0.01"; the error part is accepted and ignored.
                try:
                    config.summary_quantiles = tuple(float(q.split(":")[0]) for q in value.split(","))
                except ValueError:
                    raise ValueError(f"--metrics-config summary_quantiles: cannot parse '{value}'") from None
            elif key == "summary_max_age_ms":
                config.summary_max_age_ms = int(value)
            elif key == "histogram_buckets_us":
                try:
                    config.histogram_buckets_us = tuple(sorted(float(b) for b in value.split(",")))
                except ValueError:
                    raise ValueError(
                        f"--metrics-config histogram_buckets_us: cannot parse '{value}'"
                    ) from None
            else:
                config.extra[key] = value
        return config
