"""Ensembles for tests: a config writer, and a backend whose steps record what they saw.

``StepBackend`` ("stepbk") serves models with inputs X (and X2 for joins) and output
Y = X (+ X2) + the model parameter 'add', after sleeping the model parameter
'sleep' seconds; a request with a negative element fails ("negative input on
purpose", INVALID_ARG). It records each execution's interval, and each request's
id, parameters and input/output arrays, per model.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tritonpy
from tritonpy_sdk import InferenceRequest, InferenceResponse, ModelInstance, Tensor, TritonError, hookimpl
from tritonpy_testbackend import CpuBackend, TestBackend, write_model, write_sender_models


@dataclass
class Seen:
    """What one request of a step model looked like."""

    model: str
    id: str
    parameters: dict[str, Any]
    inputs: dict[str, np.ndarray[Any, Any]]
    output: np.ndarray[Any, Any] | None


@dataclass
class StepLog:
    intervals: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    requests: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, model: str, request_id: str) -> Seen:
        return next(s for s in self.requests if s.model == model and s.id == request_id)


class StepBackend(CpuBackend):
    def __init__(self) -> None:
        self.log = StepLog()

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        params = instance.model.parameters
        start = time.monotonic()
        if "sleep" in params:
            time.sleep(float(params["sleep"]))
        add = float(params.get("add", "0"))
        responses = []
        for r in requests:
            inputs = {name: t.data for name, t in r.inputs.items()}
            output = None
            if any((a < 0).any() for a in inputs.values()):
                responses.append(
                    InferenceResponse.from_error(TritonError.invalid_arg("negative input on purpose"))
                )
            elif params.get("no_output") == "yes":
                responses.append(InferenceResponse({}))  # a response without its output
            else:
                output = (sum(inputs.values()) + add).astype(np.float32)
                responses.append(InferenceResponse({"Y": Tensor.from_numpy("Y", output)}))
            seen = Seen(instance.model.name, r.id, dict(r.parameters), inputs, output)
            with self.log.lock:
                self.log.requests.append(seen)
        with self.log.lock:
            self.log.intervals[instance.model.name].append((start, time.monotonic()))
        return responses


def write_step_model(
    repo: Path, name: str, inputs: int = 1, extra: str = "", optional: bool = False, **params: str
) -> None:
    """A ``stepbk`` model: FP32 [-1] inputs X (and X2; ``optional`` ones), output Y (the sum
    of the inputs given, plus the parameter ``add``; none with ``no_output="yes"``),
    batching up to 8."""
    (repo / name / "1").mkdir(parents=True)
    names = ["X", "X2"][:inputs]
    flag = " optional: true" if optional else ""
    ins = ", ".join(f'{{ name: "{n}" data_type: TYPE_FP32 dims: [ -1 ]{flag} }}' for n in names)
    settings = "".join(
        f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}\n' for k, v in params.items()
    )
    (repo / name / "config.pbtxt").write_text(
        f'backend: "stepbk"\nmax_batch_size: 8\ninput [ {ins} ]\n'
        f'output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]\n{settings}{extra}'
    )


def step(model: str, inputs: dict[str, str], outputs: dict[str, str], version: int = -1) -> str:
    """One step of ``ensemble_scheduling`` in config.pbtxt text."""
    ins = " ".join(f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    outs = " ".join(f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: {version} {ins} {outs} }}'


def write_ensemble(
    repo: Path,
    name: str,
    steps: Sequence[str],
    inputs: dict[str, str],
    outputs: dict[str, str],
    dims: str = "-1",
    max_batch_size: int = 8,
    extra: str = "",
    max_inflight: int = 0,
) -> None:
    """An ensemble with ``inputs`` and ``outputs`` (name → TYPE_*) of ``dims``, and a ``1/``
    folder; ``max_inflight``: its ``max_inflight_requests`` (0: not written)."""
    (repo / name / "1").mkdir(parents=True)
    ins = ", ".join(f'{{ name: "{n}" data_type: {t} dims: [ {dims} ] }}' for n, t in inputs.items())
    outs = ", ".join(f'{{ name: "{n}" data_type: {t} dims: [ {dims} ] }}' for n, t in outputs.items())
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {max_batch_size}\n'
        f"input [ {ins} ]\noutput [ {outs} ]\n"
        f"ensemble_scheduling {{ step [ {', '.join(steps)} ] "
        f"{f'max_inflight_requests: {max_inflight} ' if max_inflight else ''}}}\n{extra}"
    )


def write_pipe(repo: Path) -> None:
    """``pipe``: ``pre`` (Y = X + 1) then ``post`` (Y = X + 100); its tensor MID is an
    output of its own and the next step's input."""
    write_step_model(repo, "pre", add="1")
    write_step_model(repo, "post", add="100")
    write_ensemble(
        repo,
        "pipe",
        [step("pre", {"X": "IN"}, {"Y": "MID"}), step("post", {"X": "MID"}, {"Y": "OUT"})],
        {"IN": "TYPE_FP32"},
        {"OUT": "TYPE_FP32", "MID": "TYPE_FP32"},
    )


def write_streaming(repo: Path, name: str, max_inflight: int = 0) -> None:
    """``name``: "decoupled" (testbk, 3 responses per request) streams into "addsub";
    OUT = A + 2 B for each response. Writes the two members too."""
    write_sender_models(repo)
    write_model(repo, "addsub")
    write_ensemble(
        repo,
        name,
        [
            step("decoupled", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "s"}),
            step("addsub", {"INPUT0": "s", "INPUT1": "B"}, {"OUTPUT0": "OUT"}),
        ],
        {"A": "TYPE_INT32", "B": "TYPE_INT32"},
        {"OUT": "TYPE_INT32"},
        dims="4",
        max_inflight=max_inflight,
    )


@contextmanager
def serving(repo: Path, write: Callable[[Path], None], steps: StepBackend) -> Iterator[tritonpy.Server]:
    """A server on ``repo`` once ``write(repo)`` filled it, with ``steps`` as "stepbk"
    and a ``TestBackend`` as "testbk"."""
    write(repo)
    server = tritonpy.Server(model_repository=repo)
    server.backends.register("stepbk", steps)
    server.backends.register("testbk", TestBackend())
    with server:
        yield server
