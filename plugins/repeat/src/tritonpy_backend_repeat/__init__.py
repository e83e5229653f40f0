"""tritonpy-backend-repeat: zero, one or many responses per request, as Triton's repeat backend sends them.

Registered under the entry-point group ``tritonpy.backends`` as ``repeat``.
Triton's containers ship the C++ ``repeat`` backend (the repository
``triton-inference-server/repeat_backend``), the example of a decoupled
backend that NVIDIA's QA suites and example clients use (``repeat_int32``).
With this package those repositories load unchanged: the same config rules and
messages (``_config.py``), the same responses, delays and errors
(``_respond.py``).

A model has inputs ``IN`` (INT32, any vector), ``DELAY`` (UINT32, IN's shape)
and ``WAIT`` (UINT32 ``[1]``), and outputs ``OUT`` (INT32 ``[1]``) and ``IDX``
(UINT32 ``[1]``). Each request gets one response per element of ``IN``, sent
from a thread of its own: the ``i``-th after ``DELAY[i]`` ms, with ``OUT`` =
``IN[i]`` and ``IDX`` = ``i``; then the FINAL flag alone. The execution holds
the request ``WAIT`` ms and returns, so with ``WAIT`` shorter than the delays
one instance streams the responses of several requests at once, interleaved.
An instance is finalized once all its response threads have ended.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tritonpy_sdk import (
    BackendInfo,
    InferenceRequest,
    Model,
    ModelInstance,
    TritonError,
    hookimpl,
)

from ._config import validate
from ._respond import InFlight, Repeat, answer_error, read, stream

__all__ = ["__version__"]
__version__ = "0.1.0"


@dataclass(frozen=True, slots=True)
class InstanceState:
    """Per instance: its name (in the log lines) and its running response threads."""

    name: str
    inflight: InFlight


@hookimpl
def backend_info() -> BackendInfo:
    return BackendInfo(
        platforms=(),
        default_model_filename="",  # no model file: the config is the whole model
        # Triton's default for a backend that states no preference: KIND_GPU on a host with
        # GPUs, KIND_CPU elsewhere. Nothing here touches a GPU either way.
        default_instance_kind="KIND_AUTO",
        default_instance_count=1,
    )


@hookimpl
def model_initialize(model: Model) -> None:
    logger = model.backend.logger
    logger.info("TRITONBACKEND_ModelInitialize: %s (version %d)", model.name, model.version)
    logger.info("model configuration:\n%s", json.dumps(model.config, indent=4))
    validate(model.config)


@hookimpl
def model_finalize(model: Model) -> None:
    model.backend.logger.info("TRITONBACKEND_ModelFinalize: delete model state")
    model.state = None


@hookimpl
def instance_initialize(instance: ModelInstance) -> None:
    instance.model.backend.logger.info(
        "TRITONBACKEND_ModelInstanceInitialize: %s (%s device %d)",
        instance.name,
        instance.kind,
        instance.device_id,
    )
    instance.state = InstanceState(instance.name, InFlight())


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    state: InstanceState | None = instance.state
    instance.model.backend.logger.info("TRITONBACKEND_ModelInstanceFinalize: delete instance state")
    if state is not None:
        state.inflight.wait_idle()  # the responses still being sent end first, as in repeat.cc
    instance.state = None


@hookimpl
def execute(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> None:
    """Start each request's responses on a thread of its own, wait ``WAIT`` ms, return:
    the request is released while its responses may still be coming."""
    state: InstanceState = instance.state
    logger = instance.model.backend.logger
    logger.info("model instance %s, executing %d requests", state.name, len(requests))
    if len(requests) > 1:
        # An error for the whole execution: the core answers each request with it.
        raise TritonError.invalid_arg("repeat backend does not support batched request execution")
    wait_ms = 0
    for request in requests:
        wait_ms, plan = read(request)
        if isinstance(plan, TritonError):
            answer_error(request, plan, logger)
            continue
        _start(state, plan, logger)
    logger.info("waiting %d ms before releasing requests", wait_ms)
    if wait_ms > 0:
        time.sleep(wait_ms / 1000.0)
    return None


def _start(state: InstanceState, plan: Repeat, logger: logging.Logger) -> None:
    state.inflight.started()
    try:
        threading.Thread(
            target=stream, args=(plan, state.inflight, logger), name=f"repeat {state.name}", daemon=True
        ).start()
    except BaseException:
        state.inflight.ended()
        raise
