"""tritonpy-backend-identity: ``OUTPUT<i>`` is ``INPUT<i>``, as Triton's identity backend answers.

Registered under the entry-point group ``tritonpy.backends`` as ``identity``.
Triton's containers ship the C++ ``identity`` backend (the repository
``triton-inference-server/identity_backend``) as a test and utility backend:
model repositories and NVIDIA's QA suites use ``backend: "identity"`` models as
pass-through steps of ensembles and as stand-ins for real models. With this
package they load unchanged: the same config rules and messages
(``_config.py``), the same parameters (``execute_delay_ms``,
``instance_wise_delay_multiplier``, ``creation_delay_sec``, and
``enable_custom_tracing`` with its custom trace activities), the same answers
(``_respond.py``) and the same custom metric (``_metric.py``).

Each request is answered on its own (no batch is formed in the backend): the
dynamic batcher hands an execution several requests, each gets its own inputs
back. Instances of every kind run here; their data stays in host memory.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonpy_sdk import (
    Backend,
    BackendInfo,
    DirectCall,
    InferenceRequest,
    InferenceResponse,
    Metric,
    Model,
    ModelInstance,
    hookimpl,
)

from ._config import INPUT_PREFIX, OUTPUT_PREFIX, Settings, read_settings
from ._metric import InputByteSize
from ._respond import answer

__all__ = ["__version__"]
__version__ = "0.1.0"


@dataclass(eq=False)
class ModelState:
    """Per model version: the checked settings, its metric series, and the instance counter."""

    settings: Settings
    batching: bool
    metric: Metric | None
    #: Instance indices in the order instances initialize (identity.cc's ``instance_count_``).
    instance_indices: itertools.count[int] = field(default_factory=itertools.count)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True, slots=True)
class InstanceState:
    """Per instance: its index among the model's instances and the sleep of each execution."""

    index: int
    delay_s: float


@hookimpl
def backend_info() -> BackendInfo:
    return BackendInfo(
        platforms=(),
        default_model_filename="",  # no model file: the config is the whole model
        # Triton's default for a backend that states no preference: KIND_GPU on a host with
        # GPUs, KIND_CPU elsewhere. The data stays in host memory either way.
        default_instance_kind="KIND_AUTO",
        default_instance_count=1,
        parallel_instance_init=True,  # as identity.cc declares
    )


@hookimpl
def initialize(backend: Backend) -> None:
    # The metric family is the backend's (identity.cc: IdentityBackendState); None without a server.
    backend.state = InputByteSize(backend.server) if backend.server is not None else None


@hookimpl
def finalize(backend: Backend) -> None:
    metrics: InputByteSize | None = backend.state
    if metrics is not None:
        metrics.close()
    backend.state = None


@hookimpl
def model_initialize(model: Model) -> None:
    settings = read_settings(model.config)
    logger = model.backend.logger
    if settings.creation_delay_sec > 0:
        logger.info("Creation delay is set to: %d", settings.creation_delay_sec)  # identity.cc's line
        time.sleep(settings.creation_delay_sec)
    metrics: InputByteSize | None = model.backend.state
    model.state = ModelState(
        settings=settings,
        batching=model.max_batch_size > 0,
        metric=metrics.acquire(model.name, model.version) if metrics is not None else None,
    )


@hookimpl
def model_finalize(model: Model) -> None:
    state: ModelState | None = model.state
    metrics: InputByteSize | None = model.backend.state
    if state is not None and state.metric is not None and metrics is not None:
        metrics.release(state.metric)
    model.state = None


@hookimpl
def instance_initialize(instance: ModelInstance) -> None:
    state: ModelState = instance.model.state
    with state.lock:  # instances may initialize in parallel
        index = next(state.instance_indices)
    instance.state = InstanceState(index, state.settings.delay_ms(index) / 1000.0)
    # In-process predict without request objects (the core decides when it applies).
    instance.direct = True


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    instance.state = None


@hookimpl
def execute(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
    own: InstanceState = instance.state
    model: ModelState = instance.model.state
    if own.delay_s > 0:
        time.sleep(own.delay_s)
    settings = model.settings
    if settings.custom_tracing:
        for request in requests:
            if request.traced:
                _report_activities(request, settings)
    return [answer(request, settings, model.batching, model.metric) for request in requests]


def _report_activities(request: InferenceRequest, settings: Settings) -> None:
    """identity.cc's custom trace activities, in its order and with its sleeps: a
    CUSTOM_ACTIVITY span of 100 ms, a CUSTOM_SINGLE_ACTIVITY, then ``nested_span_count``
    spans CUSTOM_ACTIVITY<i> inside each other (100 ms each, a single activity in every
    ``single_activity_frequency``-th), closed innermost first."""
    request.report_activity("CUSTOM_ACTIVITY_START")
    time.sleep(0.1)
    request.report_activity("CUSTOM_ACTIVITY_END")
    request.report_activity("CUSTOM_SINGLE_ACTIVITY")
    nested = settings.nested_span_count
    for count in range(nested):
        request.report_activity(f"CUSTOM_ACTIVITY{count}_START")
        time.sleep(0.1)
        if count % settings.single_activity_frequency == 0:
            request.report_activity("CUSTOM_SINGLE_ACTIVITY")
    for count in range(nested):
        request.report_activity(f"CUSTOM_ACTIVITY{nested - count - 1}_END")


@hookimpl
def execute_direct(
    instance: ModelInstance, call: DirectCall
) -> dict[str, np.ndarray[Any, Any]] | list[InferenceResponse]:
    """An in-process ``predict``: every output wanted, the inputs' own arrays back."""
    model: ModelState = instance.model.state
    settings = model.settings
    outputs: dict[str, np.ndarray[Any, Any]] = {}
    for name in settings.outputs:
        array = call.inputs.get(INPUT_PREFIX + name[len(OUTPUT_PREFIX) :])
        if array is None or array.dtype == np.object_:
            # Left out (zeros, or the error only a response carries), or BYTES (counted as
            # serialized): the request's way.
            return execute(instance, [call.request()])
        outputs[name] = array
    own: InstanceState = instance.state
    if own.delay_s > 0:
        time.sleep(own.delay_s)
    if model.metric is not None:
        for name in settings.outputs:
            model.metric.increment(outputs[name].nbytes)
    return outputs
