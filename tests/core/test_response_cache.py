"""The response cache: hits skip execution and are counted; keys cover what matters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy.metrics import Metrics
from tritonpy.runtime.cache import LocalCache, cache_key, create_cache
from tritonpy_sdk import InferenceRequest, InferenceResponse, RequestedOutput, Tensor, TritonError, hookimpl
from tritonpy_testbackend import TestBackend, write_model


class Counting(TestBackend):
    """The test backend, counting the requests it really executes."""

    def __init__(self) -> None:
        self.executed = 0

    @hookimpl
    def execute(self, instance, requests):  # type: ignore[no-untyped-def,override]
        self.executed += len(requests)
        return TestBackend.execute(self, instance, requests)


def test_hits_skip_execution_and_are_counted(tmp_path: Path) -> None:
    write_model(tmp_path, "cached", extra="response_cache { enable: true }")
    write_model(tmp_path, "uncached")
    backend = Counting()
    server = tritonpy.Server(model_repository=tmp_path, cache_config={"local": {"size": "1048576"}})
    server.backends.register("testbk", backend)
    with server:
        a = np.arange(4, dtype=np.int32).reshape(1, 4)
        b = np.ones((1, 4), np.int32)
        first = server.model("cached").predict({"INPUT0": a, "INPUT1": b})
        for _ in range(3):
            again = server.model("cached").predict({"INPUT0": a, "INPUT1": b})
            np.testing.assert_array_equal(again["OUTPUT0"], first["OUTPUT0"])
        server.model("cached").predict({"INPUT0": a + 1, "INPUT1": b})  # other data: a miss
        (response,) = server.model("cached").infer({"INPUT0": a, "INPUT1": b}, request_id="hit-id")
        assert response.id == "hit-id"  # a hit still answers with the caller's id
        for _ in range(2):
            server.model("uncached").predict({"INPUT0": a, "INPUT1": b})
        assert backend.executed == 2 + 2
        (stats,) = server.model_statistics("cached")
        inference = stats["inference_stats"]
        assert inference["cache_hit"]["count"] == 4 and inference["cache_miss"]["count"] == 2
        assert inference["success"]["count"] == 6
        # As Triton 2.51 counts them (observed): cache hits are queue entries too.
        assert inference["queue"]["count"] == 6
        assert stats["execution_count"] == 2 and stats["inference_count"] == 2
        text = Metrics(server.loaded_versions(), cpu=False, gpu=False, cache=server.cache).render()
    assert 'nv_cache_num_hits_per_model{model="cached",version="1"} 4' in text
    assert 'nv_cache_num_misses_per_model{model="cached",version="1"} 2' in text
    assert "nv_cache_num_entries 2" in text
    # Triton's global families (observed): every one a gauge, lookup and insertion durations included.
    types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE nv_cache_"))
    assert {name: kind for name, kind in types.items() if not name.endswith("_per_model")} == {
        name: "gauge"
        for name in (
            "nv_cache_util",
            "nv_cache_num_entries",
            "nv_cache_num_hits",
            "nv_cache_num_misses",
            "nv_cache_num_lookups",
            "nv_cache_num_evictions",
            "nv_cache_lookup_duration",
            "nv_cache_insertion_duration",
        )
    }
    assert "nv_cache_num_lookups 6\n" in text and "nv_cache_num_hits 4\n" in text
    assert (
        "# HELP nv_cache_lookup_duration Total cache lookup duration (hit and miss), in microseconds" in text
    )
    assert "# HELP nv_cache_insertion_duration Total cache insertion duration, in microseconds" in text
    assert (
        "# HELP nv_cache_miss_duration_per_model Total cache miss (insert+lookup) duration per model, "
        "in microseconds" in text
    )
    assert 'model="uncached"' not in "".join(line for line in text.splitlines() if "nv_cache" in line)


def _request(**over: object) -> InferenceRequest:
    x = np.array([[1, 2]], np.float32)
    request = InferenceRequest("m", 1, {"X": Tensor.from_numpy("X", x)})
    for key, value in over.items():
        setattr(request, key, value)
    return request


def test_key_covers_model_version_data_and_outputs() -> None:
    base = cache_key(_request())
    assert base == cache_key(_request())
    assert base != cache_key(_request(model_version=2))
    assert base != cache_key(_request(model_name="n"))
    assert base != cache_key(_request(inputs={"X": Tensor.from_numpy("X", np.array([[1, 3]], np.float32))}))
    assert base != cache_key(_request(requested_outputs=[RequestedOutput("Y", {"classification": 2})]))


def test_local_cache_evicts_least_recently_used() -> None:
    cache = LocalCache(size=2 * (400 + 256))
    out = InferenceResponse({"Y": Tensor.from_numpy("Y", np.zeros(100, np.float32))})
    cache.insert(b"a", out)
    cache.insert(b"b", out)
    assert cache.lookup(b"a") is not None  # a is now the most recent
    cache.insert(b"c", out)
    assert cache.lookup(b"b") is None and cache.lookup(b"a") is not None
    assert cache.stats()["evictions"] == 1 and cache.stats()["entries"] == 2


def test_cache_configuration_errors() -> None:
    with pytest.raises(TritonError, match="size=<bytes> greater than 0"):
        create_cache("local", {})
    with pytest.raises(TritonError, match="unknown cache 'redis'"):
        create_cache("redis", {"host": "x"})
    with pytest.raises(TritonError) as info:
        tritonpy.Server(cache_config={"local": {"size": "10"}, "redis": {"host": "x"}})
    assert info.value.message == (  # Triton's words
        "found multiple cache configurations, but only a single cache is currently supported"
    )


def test_cache_plugins_come_from_entry_points(site: Path) -> None:
    (site / "tp_test_dictcache.py").write_text(
        "from tritonpy.runtime.cache import LocalCache\n"
        "def factory(settings):\n"
        "    return LocalCache(int(settings['bytes']))\n"
    )
    info = site / "tp_test_dictcache-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tp-test-dictcache\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tritonpy.caches]\ndictcache = tp_test_dictcache:factory\n")
    cache = create_cache("dictcache", {"bytes": "4096"})
    assert isinstance(cache, LocalCache) and cache.capacity == 4096


def test_the_cache_keeps_its_own_read_only_copy() -> None:
    """A model may answer with views of memory that changes later (its input's, in a
    client's shared-memory region); a hit answers what was computed, and nobody who
    gets a hit can change it for the next."""
    cache = LocalCache(size=1 << 20)
    produced = np.arange(4, dtype=np.int32)
    cache.insert(b"k", InferenceResponse({"Y": Tensor.from_numpy("Y", produced)}))
    produced[:] = 99  # its owner reuses the memory
    hit = cache.lookup(b"k")
    assert hit is not None and hit.outputs["Y"].data.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        hit.outputs["Y"].data[0] = 7
