"""model_warmup runs on every instance before the model is READY; a failure makes it UNAVAILABLE."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend


class Seen(CpuBackend):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[int, ...], float]] = []
        self.batches: list[tuple[str, list[str]]] = []

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        out = []
        self.batches.append((instance.name, [r.id for r in requests]))
        for r in requests:
            x = r.inputs["X"].data
            self.calls.append((instance.name, r.id, x.shape, float(x.sum())))
            if instance.model.parameters.get("fail_warmup"):
                raise TritonError.internal("cannot warm up")
            out.append(InferenceResponse({"Y": Tensor.from_numpy("Y", x)}))
        return out


def _model(repo: Path, name: str, warmup: str, extra: str = "") -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(
        f"""
backend: "seen"
max_batch_size: 4
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 3 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 3 ] }} ]
instance_group [ {{ count: 2, kind: KIND_CPU }} ]
model_warmup [ {warmup} ]
{extra}
"""
    )


def test_warmup_samples_run_on_every_instance_before_ready(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As Triton 2.51 runs them (observed): a sample of batch size N is N requests of one
    item each, without an id, executed together (a data file holds one item); a sample of
    batch size 0 is skipped."""
    _model(
        tmp_path,
        "warm",
        '{ name: "zeros" batch_size: 2 count: 2 inputs { key: "X" value: '
        "{ data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } }, "
        '{ name: "file" batch_size: 3 inputs { key: "X" value: '
        '{ data_type: TYPE_FP32 dims: [ 3 ] input_data_file: "x.bin" } } }, '
        '{ name: "none" batch_size: 0 inputs { key: "X" value: '
        "{ data_type: TYPE_FP32 dims: [ 3 ] random_data: true } } }",
    )
    (tmp_path / "warm" / "warmup").mkdir()
    (tmp_path / "warm" / "warmup" / "x.bin").write_bytes(np.array([1, 2, 3], np.float32).tobytes())
    backend = Seen()
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("seen", backend)
    caplog.set_level(logging.DEBUG, "tritonpy.loading")
    with server:
        assert server.model("warm").ready()
        # Triton's verbose lines, which NVIDIA's L0_warmup looks for in the log.
        runs = [r.getMessage() for r in caplog.records if "is running warmup sample" in r.getMessage()]
        assert "model 'warm' instance warm_0_1 is running warmup sample 'zeros' for iteration 2" in runs
        assert len(runs) == 2 * (2 + 1)  # per instance: "zeros" twice, "file" once
        warm = backend.calls  # no request has been sent yet
        assert sorted({c[0] for c in warm}) == ["warm_0_0", "warm_0_1"]
        assert [c for c in warm if c[0] == "warm_0_0"] == [("warm_0_0", "", (1, 3), 0.0)] * 4 + [
            ("warm_0_0", "", (1, 3), 6.0)
        ] * 3
        assert [len(batch) for name, batch in backend.batches if name == "warm_0_0"] == [2, 2, 3]


def test_failing_warmup_makes_the_model_unavailable(tmp_path: Path) -> None:
    _model(
        tmp_path,
        "cold",
        '{ name: "w" batch_size: 2 inputs { key: "X" value: '
        "{ data_type: TYPE_FP32 dims: [ 3 ] random_data: true } } }",
        extra='parameters { key: "fail_warmup" value: { string_value: "1" } }',
    )
    _model(
        tmp_path,
        "missing_file",
        '{ name: "w" batch_size: 1 inputs { key: "X" value: '
        '{ data_type: TYPE_FP32 dims: [ 3 ] input_data_file: "nope.bin" } } }',
    )
    _model(
        tmp_path,
        "short_file",
        '{ name: "w" batch_size: 1 inputs { key: "X" value: '
        '{ data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "short.bin" } } }',
    )
    (tmp_path / "short_file" / "warmup").mkdir()
    (tmp_path / "short_file" / "warmup" / "short.bin").write_bytes(bytes(12))
    server = tritonpy.Server(model_repository=tmp_path, exit_on_error=False)
    server.backends.register("seen", Seen())
    with server:
        index = {e["name"]: e for e in server.repository_index()}
    assert index["cold"]["state"] == "UNAVAILABLE"
    # Triton's words (observed on 2.51): every request's error, each followed by "; "
    assert "failed to run warmup sample 'w': cannot warm up; cannot warm up; " in index["cold"]["reason"]
    assert "nope.bin cannot be read" in index["missing_file"]["reason"]
    assert (
        "[request id: <id_unknown>] warmup setting expects 16 bytes, but the data provided from "
        "short.binonly has 12 bytes"
    ) in index["short_file"]["reason"]
