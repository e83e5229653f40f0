"""Statistics stamped by the core: exact counts after a known sequence of requests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy.metrics import Metrics, MetricsConfig
from tritonpy.metrics._exposition import Family, render
from tritonpy.runtime.model import LoadedVersion
from tritonpy_sdk import TritonError
from tritonpy_testbackend import TestBackend


@pytest.fixture
def server(test_repos: list[Path]) -> Iterator[tritonpy.Server]:
    server = tritonpy.Server(model_repository=test_repos)
    server.backends.register("testbk", TestBackend())
    with server:
        yield server


def _send(server: tritonpy.Server, model: str, batch: int) -> None:
    a = np.ones((batch, 4), np.int32)
    server.model(model).predict({"INPUT0": a, "INPUT1": a})


def test_counts_and_batch_stats(server: tritonpy.Server) -> None:
    before_ms = time.time_ns() // 1_000_000
    for batch in (1, 1, 3, 2, 3, 3):
        _send(server, "addsub", batch)
    with pytest.raises(TritonError):  # rejected by validation: not counted, as in Triton
        server.model("addsub").predict({"INPUT0": np.ones((1, 4), np.int32)})
    (stats,) = server.model_statistics("addsub")
    assert (stats["name"], stats["version"]) == ("addsub", "1")
    assert stats["inference_count"] == 13
    assert stats["execution_count"] == 6
    inference = stats["inference_stats"]
    assert inference["success"]["count"] == 6 and inference["fail"]["count"] == 0
    for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert inference[stage]["count"] == 6
        assert inference[stage]["ns"] > 0
    assert inference["success"]["ns"] >= inference["compute_infer"]["ns"]
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in stats["batch_stats"]] == [
        (1, 2),
        (2, 1),
        (3, 3),
    ]
    # Wall-clock milliseconds of the last inference (kept as a monotonic stamp, converted when read).
    assert before_ms <= stats["last_inference"] <= time.time_ns() // 1_000_000
    # Each ran on the calling thread at once (no worker was needed): nothing is left pending.
    assert server.get_version("addsub").stats.counters()["pending"] == 0


def test_backend_failures_are_counted(server: tritonpy.Server) -> None:
    for _ in range(2):
        with pytest.raises(TritonError, match="backend blew up"):
            _send(server, "failing", 1)
    (stats,) = server.model_statistics("failing")
    inference = stats["inference_stats"]
    assert inference["fail"]["count"] == 2 and inference["fail"]["ns"] > 0
    assert inference["success"]["count"] == 0
    assert stats["execution_count"] == 2 and stats["inference_count"] == 0
    # As Triton 2.51 (observed): a failed request is counted in "fail" alone, not in the
    # stages, while its execution counts in the batch statistics.
    for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert inference[stage] == {"count": 0, "ns": 0}
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in stats["batch_stats"]] == [(1, 2)]
    metrics = Metrics(server.loaded_versions(), MetricsConfig(), cpu=False, gpu=False)
    s = _samples(metrics.render())
    key = '{model="failing",version="1"}'
    assert s[f"nv_inference_request_duration_us{key}"] == 0  # successes only, as Triton
    assert s[f"nv_inference_queue_duration_us{key}"] == 0
    assert s[f"nv_inference_exec_count{key}"] == 2


def test_statistics_selection(server: tritonpy.Server) -> None:
    names = {s["name"] for s in server.model_statistics()}
    assert {"addsub", "classes", "failing"} <= names
    assert server.model_statistics("addsub", "1")[0]["version"] == "1"
    with pytest.raises(TritonError, match="requested model 'nope' is not available"):
        server.model_statistics("nope")
    for version in (7, 0):  # Triton 2.51's words; 0 is a number, not the latest
        with pytest.raises(TritonError) as info:
            server.model_statistics("addsub", version)
        assert info.value.message == "requested model version is not available for model 'addsub'"


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_metrics_equal_statistics(server: tritonpy.Server) -> None:
    metrics = Metrics(server.loaded_versions(), MetricsConfig(), cpu=True, gpu=False)
    for batch in (2, 2, 1):
        _send(server, "addsub", batch)
    with pytest.raises(TritonError):
        _send(server, "failing", 1)
    metrics.poll()
    text = metrics.render()
    s = _samples(text)
    key = '{model="addsub",version="1"}'
    assert s[f"nv_inference_request_success{key}"] == 3
    assert s[f"nv_inference_count{key}"] == 5
    assert s[f"nv_inference_exec_count{key}"] == 3
    assert s[f"nv_inference_pending_request_count{key}"] == 0
    assert s['nv_inference_request_failure{model="failing",reason="BACKEND",version="1"}'] == 1
    assert s['nv_inference_request_failure{model="addsub",reason="BACKEND",version="1"}'] == 0
    (stats,) = server.model_statistics("addsub")
    assert (
        s[f"nv_inference_compute_infer_duration_us{key}"]
        == stats["inference_stats"]["compute_infer"]["ns"] // 1000
    )
    assert "# TYPE nv_inference_count counter" in text  # Triton's names: no _total suffix
    assert "nv_inference_count_total" not in text
    assert 0.0 <= s["nv_cpu_utilization"] <= 1.0 and s["nv_cpu_memory_total_bytes"] > 0
    assert "summary" not in text and "histogram" not in text


def test_summaries_and_histograms_only_when_enabled(server: tritonpy.Server) -> None:
    config = MetricsConfig.parse(
        ["summary_latencies=true", "histogram_latencies=true", "histogram_buckets_us=1,1000000000"]
    )
    metrics = Metrics(server.loaded_versions(), config, cpu=False, gpu=False)
    for _ in range(4):
        _send(server, "addsub", 1)
    s = _samples(metrics.render())
    key = 'model="addsub",version="1"'
    assert s[f"nv_inference_request_summary_us_count{{{key}}}"] == 4
    assert f'nv_inference_request_summary_us{{{key},quantile="0.99"}}' in s
    assert s[f'tritonpy_inference_request_histogram_us_bucket{{{key},le="1000000000"}}'] == 4
    assert s[f'tritonpy_inference_request_histogram_us_bucket{{{key},le="+Inf"}}'] == 4
    assert s[f"tritonpy_inference_queue_histogram_us_count{{{key}}}"] == 4
    # Triton's histogram: milliseconds to the first response, Triton's default buckets.
    first = "nv_inference_first_response_histogram_ms"
    text = metrics.render()
    assert f"# HELP {first} Duration from request to first response in milliseconds" in text
    assert f"# TYPE {first} histogram" in text
    for le in ("100", "500", "2000", "5000", "+Inf"):
        assert s[f'{first}_bucket{{{key},le="{le}"}}'] == 4
    assert s[f"{first}_count{{{key}}}"] == 4
    assert 0 < s[f"{first}_sum{{{key}}}"] < 4 * 100


def test_metrics_read_the_current_models_at_every_scrape(server: tritonpy.Server) -> None:
    current: list[LoadedVersion] = []
    config = MetricsConfig.parse(["summary_latencies=true"])
    metrics = Metrics(lambda: current, config, cpu=False, gpu=False)
    key = 'model="addsub",version="1"'
    assert key not in metrics.render()  # nothing loaded yet
    current.extend(mv for mv in server.loaded_versions() if mv.name == "addsub")  # "loaded" later
    before = _samples(metrics.render())[f"nv_inference_request_success{{{key}}}"]
    _send(server, "addsub", 1)
    s = _samples(metrics.render())
    assert s[f"nv_inference_request_success{{{key}}}"] == before + 1
    assert s[f"nv_inference_request_summary_us_count{{{key}}}"] == 1  # observed since it appeared
    current.clear()  # "unloaded"
    assert key not in metrics.render()


def test_labels_are_written_in_tritons_order() -> None:
    family = Family("h", "help", "histogram")
    family.add({"version": "1", "model": "m", "le": "100", "_team": "t"}, 2, "_bucket")
    summary = Family("s", "help", "summary")
    summary.add({"quantile": "0.5", "version": "1", "model": "m"}, 3)
    text = render([family, summary])
    assert 'h_bucket{_team="t",model="m",version="1",le="100"} 2' in text  # by name, le last
    assert 's{model="m",version="1",quantile="0.5"} 3' in text


def test_metrics_config_errors() -> None:
    with pytest.raises(ValueError, match="expects key=value"):
        MetricsConfig.parse(["summary_latencies"])
    with pytest.raises(ValueError, match="expects true or false"):
        MetricsConfig.parse(["summary_latencies=maybe"])


def test_metric_tags_become_labels(tmp_path: Path) -> None:
    from tritonpy_testbackend import write_model

    write_model(tmp_path, "tagged", extra='metric_tags { key: "team" value: "search" }')
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("testbk", TestBackend())
    with server:
        _send(server, "tagged", 1)
        text = Metrics(server.loaded_versions(), cpu=False, gpu=False).render()
    assert 'nv_inference_request_success{_team="search",model="tagged",version="1"} 1' in text


@pytest.mark.gpu
def test_gpu_gauges_through_nvml() -> None:
    from tritonpy.metrics._system import Nvml

    nvml = Nvml()
    if not nvml.available:
        pytest.skip("no GPU visible to NVML")
    (first, *_) = nvml.read()
    assert first.uuid.startswith("GPU-")
    assert first.memory_total > first.memory_used > 0
    metrics = Metrics([], cpu=False, gpu=True)
    metrics.poll()
    assert f'nv_gpu_memory_total_bytes{{gpu_uuid="{first.uuid}"}}' in metrics.render()


def test_custom_histogram_bounds_print_as_triton_prints_them() -> None:
    """The ``le`` labels Triton 2.51 printed for these buckets of a pb_utils
    histogram (observed): C's ``%.16g``, not Python's ``repr``."""
    from tritonpy.metrics._custom import custom_families
    from tritonpy.metrics._exposition import render
    from tritonpy_sdk import MetricKind
    from tritonpy_sdk.host import MetricRegistry

    registry = MetricRegistry()
    family = registry.family("custom_hist2", "h2", MetricKind.HISTOGRAM)
    family.metric({}, [1e-05, 0.1, 0.3, 1, 2.5, 7, 1000000, 123456789012, 1e20, 1.5e300]).observe(0.25)
    text = render(custom_families(registry))
    les = [line.split('le="')[1].split('"')[0] for line in text.splitlines() if "_bucket" in line]
    assert les == [
        "1e-05",
        "0.1",
        "0.3",
        "1",
        "2.5",
        "7",
        "1000000",
        "123456789012",
        "1e+20",
        "1.5e+300",
        "+Inf",
    ]


def test_first_response_histogram_counts_each_request_once(tmp_path: Path) -> None:
    """A decoupled model's request is observed at its first response, not at each one;
    a model that answers through its sender, once, like any other."""
    from tritonpy_testbackend import write_sender_models

    write_sender_models(tmp_path)
    server = tritonpy.Server(model_repository=[tmp_path])
    server.backends.register("testbk", TestBackend())
    with server:
        metrics = Metrics(
            server.loaded_versions(), MetricsConfig.parse(["histogram_latencies=true"]), cpu=False, gpu=False
        )
        a = np.ones((1, 4), np.int32)
        for model in ("decoupled", "sender_one"):
            for _ in range(2):
                assert list(server.model(model).infer(inputs={"INPUT0": a, "INPUT1": a}))
        s = _samples(metrics.render())
    for model in ("decoupled", "sender_one"):
        assert s[f'nv_inference_first_response_histogram_ms_count{{model="{model}",version="1"}}'] == 2


def test_model_metrics_set_histogram_buckets_and_warn_of_other_families(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As Triton: ``model_metrics`` sets the buckets of a histogram family; a family whose
    buckets cannot be set is named in a warning (Triton's words) and the model loads."""
    from tritonpy_scale import CONFIG, Scale

    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.txt").write_text("2")
    controls = ", ".join(
        f'{{ metric_identifier {{ family: "{family}" }} histogram_options {{ buckets: [ 1, 2 ] }} }}'
        for family in ("nv_inference_first_response_histogram_ms", "nv_inference_request_success")
    )
    (tmp_path / "m" / "config.pbtxt").write_text(
        CONFIG + f"model_metrics {{ metric_control [ {controls} ] }}\n"
    )
    server = tritonpy.Server(model_repository=[tmp_path])
    server.backends.register("scale", Scale())
    with caplog.at_level("WARNING", logger="tritonpy"), server:
        metrics = Metrics(
            server.loaded_versions(), MetricsConfig.parse(["histogram_latencies=true"]), cpu=False, gpu=False
        )
        server.model("m").predict({"INPUT0": np.ones((1, 2), np.int32)})
        text = metrics.render()
    assert (
        "Metric family 'nv_inference_request_success' in 'metric_identifier' is not a customizable metric "
        "in Triton core."
    ) in caplog.text
    assert "nv_inference_first_response_histogram_ms' in 'metric_identifier'" not in caplog.text
    buckets = [
        line
        for line in text.splitlines()
        if line.startswith("nv_inference_first_response_histogram_ms_bucket")
    ]
    assert [line.split("le=")[1].split("}")[0] for line in buckets] == ['"1"', '"2"', '"+Inf"']
