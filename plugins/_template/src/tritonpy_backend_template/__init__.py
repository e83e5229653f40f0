"""A template tritonpy backend: OUTPUTn = INPUTn * scale, with scale read from model.json.

Each hook says what a real backend does there. Hooks keep no state of their
own: they store it in the ``state`` slot of the object they receive.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
from tritonpy_sdk import (
    Backend,
    BackendInfo,
    DataType,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)

__version__ = "0.1.0"


@hookimpl
def backend_info() -> BackendInfo:
    # Facts the server needs before loading any model. Must not import a framework.
    return BackendInfo(
        platforms=(),  # Triton `platform:` strings this backend serves, if any
        default_model_filename="model.json",  # also lets the server infer this backend from files
        default_instance_kind="KIND_CPU",
        default_instance_count=1,
        parallel_instance_init=True,
    )


@hookimpl
def initialize(backend: Backend) -> None:
    # Once per server, before the first model: import the framework here and keep
    # process-wide things (a runtime handle) in backend.state.
    backend.state = {"default_scale": float(backend.config.get("default-scale", "1.0"))}


@hookimpl
def auto_complete_config(model: Model) -> None:
    # Optional. Before the config is validated: fill what config.pbtxt leaves out, from
    # the model file, never changing what the user wrote. Here an output mirrors each
    # input (OUTPUTn for INPUTn), so a config need only list its inputs.
    outputs = model.config.setdefault("output", [])
    named = {o.get("name") for o in outputs}
    for entry in model.config.get("input", []):
        out_name = _output_name(str(entry.get("name", "")))
        if out_name not in named:
            # Only the fields an output has: name, data_type, dims and reshape.
            output = {k: entry[k] for k in ("data_type", "dims", "reshape") if k in entry}
            outputs.append({"name": out_name, **output})


@hookimpl
def model_initialize(model: Model) -> None:
    # Once per model version: read the model file (model.model_path) into model.state.
    path = model.model_path
    try:
        spec = json.loads(path.read_text())
    except FileNotFoundError:
        raise TritonError.invalid_arg(f"model file {path} does not exist") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise TritonError.invalid_arg(f"model file {path} is not valid JSON: {exc}") from None
    scale = spec.get("scale", model.backend.state["default_scale"])
    if not isinstance(scale, int | float):
        raise TritonError.invalid_arg(f"'scale' in {path} must be a number, got {scale!r}")
    model.state = float(scale)


@hookimpl
def instance_initialize(instance: ModelInstance) -> None:
    # Once per instance: create per-instance resources (a session, a CUDA stream) on
    # instance.kind / instance.device_id. This backend needs none.
    instance.state = instance.model.state


@hookimpl
def execute(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
    # On the instance's own thread, never concurrently for one instance. Requests are
    # already validated; return one response per request, in order. A real backend
    # would batch them with gather_inputs / scatter_output.
    scale: float = instance.state
    responses = []
    for request in requests:
        outputs = {}
        for name, tensor in request.inputs.items():
            out_name = _output_name(name)
            if tensor.datatype is DataType.BYTES:
                outputs[out_name] = Tensor(out_name, tensor.data, tensor.datatype)
            else:
                data = (tensor.data * scale).astype(tensor.data.dtype, copy=False)
                outputs[out_name] = Tensor(out_name, np.asarray(data), tensor.datatype)
        responses.append(InferenceResponse(outputs))
    return responses


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    # Release per-instance resources.
    instance.state = None


@hookimpl
def model_finalize(model: Model) -> None:
    # Release the model.
    model.state = None


@hookimpl
def finalize(backend: Backend) -> None:
    # Once at server shutdown.
    backend.state = None


def _output_name(input_name: str) -> str:
    return input_name.replace("INPUT", "OUTPUT", 1)
