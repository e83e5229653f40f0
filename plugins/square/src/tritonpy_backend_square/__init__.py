"""tritonpy-backend-square: IN responses of OUT = IN per request, as Triton's square backend sends them.

Registered under the entry-point group ``tritonpy.backends`` as ``square``.
Triton's containers ship the C++ ``square`` backend (the repository
``triton-inference-server/square_backend``), a decoupled test backend that
NVIDIA's QA suites use (``square_int32``, alone and behind ``repeat_int32`` in
ensembles; with its parameters, for response statistics and cancellation).
With this package those repositories load unchanged: the same config rules,
parameters and messages (``_config.py``), the same responses, delays,
simulated failures and cancellation (``_respond.py``).

A model has one input ``IN`` and one output ``OUT``, INT32 of shape ``[1]``.
Each request whose ``IN`` holds ``n`` gets ``n`` responses of ``OUT`` = ``n``,
sent from a thread of its own, then the FINAL flag alone (``n`` = 0: the FINAL
flag only). The execution returns at once: one instance streams the responses
of many requests at the same time. An instance is finalized once all its
response threads have ended.
"""

from __future__ import annotations

import json
import logging
import threading
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

from ._config import Parameters, read_parameters, validate
from ._respond import InFlight, Square, answer_error, read, stream

__all__ = ["__version__"]
__version__ = "0.1.0"


@dataclass(frozen=True, slots=True)
class InstanceState:
    """Per instance: its name (in the log lines), the model's parameters and its running
    response threads."""

    name: str
    parameters: Parameters
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
    # square.cc reads the parameters as it makes the model state, before the config checks.
    parameters = read_parameters(model.config, logger)
    logger.info("model configuration:\n%s", json.dumps(model.config, indent=4))
    validate(model.config)
    model.state = parameters


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
    parameters: Parameters = instance.model.state
    instance.state = InstanceState(instance.name, parameters, InFlight())


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    state: InstanceState | None = instance.state
    instance.model.backend.logger.info("TRITONBACKEND_ModelInstanceFinalize: delete instance state")
    if state is not None:
        state.inflight.wait_idle()  # the responses still being sent end first, as in square.cc
    instance.state = None


@hookimpl
def execute(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> None:
    """Start each request's responses on a thread of its own and return: the requests
    are released while their responses are still coming."""
    state: InstanceState = instance.state
    logger = instance.model.backend.logger
    logger.info("model instance %s, executing %d requests", state.name, len(requests))
    for request in requests:
        plan = read(request)
        if isinstance(plan, TritonError):
            answer_error(request, plan, logger)
            continue
        _start(state, plan, logger)
    return None


def _start(state: InstanceState, plan: Square, logger: logging.Logger) -> None:
    state.inflight.started()
    try:
        threading.Thread(
            target=stream,
            args=(plan, state.parameters, state.inflight, logger),
            name=f"square {state.name}",
            daemon=True,
        ).start()
    except BaseException:
        state.inflight.ended()
        raise
