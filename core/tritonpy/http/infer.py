"""KServe v2 inference requests and responses over HTTP, JSON and binary.

The binary tensor data extension: ``Inference-Header-Content-Length`` gives the
size of the JSON header; the binary data of inputs with a ``binary_data_size``
parameter follows it, in input order. Inputs are numpy views of the request
body (no copy); binary outputs are written from the output arrays' memory.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    RequestedOutput,
    Tensor,
    TritonError,
    deserialize_bytes_tensor,
)

from ..codec import array_from_buffer, array_from_json, array_to_buffer, array_to_json
from ..spec import ModelSpec

HEADER_LENGTH = "inference-header-content-length"


def _bad(message: str) -> TritonError:
    return TritonError.invalid_arg(message)


def _parameters(obj: dict[str, Any], where: str) -> dict[str, ParameterValue]:
    params = obj.get("parameters", {})
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise _bad(f"'parameters' of {where} must be a JSON object")
    for key, value in params.items():
        if not isinstance(value, bool | int | float | str):
            raise _bad(f"parameter '{key}' of {where} must be a bool, number or string")
    return params


def _shape(entry: dict[str, Any], name: str) -> list[int]:
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise _bad(f"input '{name}' must have a 'shape' that is a list of integers")
    return shape


def _datatype(entry: dict[str, Any], name: str) -> DataType:
    dt = entry.get("datatype")
    if not isinstance(dt, str):
        raise _bad(f"input '{name}' must have a 'datatype' string")
    try:
        return DataType.from_protocol(dt)
    except ValueError:
        raise _bad(f"invalid datatype '{dt}' for input '{name}'") from None


def decode_request(
    model: str, version: str, header: bytes | memoryview, binary: memoryview
) -> tuple[InferenceRequest, bool, dict[str, bool]]:
    """The request in ``header`` (JSON) + ``binary``.

    Returns the core request, whether outputs default to binary
    (``binary_data_output``), and each requested output's ``binary_data``.
    """
    try:
        doc = json.loads(bytes(header))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(f"failed to parse the request JSON buffer: {exc}") from None
    except RecursionError:
        raise _bad("failed to parse the request JSON buffer: it is nested too deeply") from None
    if not isinstance(doc, dict):
        raise _bad("the request JSON must be an object")
    params = dict(_parameters(doc, "the request"))
    binary_output = bool(params.pop("binary_data_output", False))
    inputs_doc = doc.get("inputs")
    if not isinstance(inputs_doc, list):
        raise _bad("the request JSON must have an 'inputs' array")
    inputs: dict[str, Tensor] = {}
    offset = 0
    for entry in inputs_doc:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _bad("each input must be an object with a 'name' string")
        name = entry["name"]
        if name in inputs:
            raise _bad(f"input '{name}' is given more than once")
        shape = _shape(entry, name)
        datatype = _datatype(entry, name)
        in_params = _parameters(entry, f"input '{name}'")
        size = in_params.get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise _bad(f"'binary_data_size' of input '{name}' must be a non-negative integer")
            if offset + size > len(binary):
                raise _bad(
                    f"unexpected size for input '{name}': 'binary_data_size' is {size} but only "
                    f"{len(binary) - offset} bytes of binary data remain"
                )
            array = array_from_buffer(name, datatype, shape, binary[offset : offset + size])
            offset += size
        elif "data" in entry:
            array = array_from_json(name, datatype, shape, entry["data"])
        else:
            raise _bad(f"input '{name}' has neither 'data' nor a 'binary_data_size' parameter")
        inputs[name] = Tensor(name, array, datatype)
    if offset != len(binary):
        raise _bad(f"the request has {len(binary) - offset} bytes of binary data that no input claims")
    outputs: list[RequestedOutput] = []
    binary_flags: dict[str, bool] = {}
    outputs_doc = doc.get("outputs", [])
    if not isinstance(outputs_doc, list):
        raise _bad("'outputs' must be an array")
    for entry in outputs_doc:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _bad("each requested output must be an object with a 'name' string")
        out_params = dict(_parameters(entry, f"output '{entry['name']}'"))
        if "binary_data" in out_params:
            binary_flags[entry["name"]] = bool(out_params.pop("binary_data"))
        outputs.append(RequestedOutput(entry["name"], out_params))
    request_id = doc.get("id", "")
    if not isinstance(request_id, str):
        raise _bad("the request 'id' must be a string")
    request = InferenceRequest(
        model_name=model,
        model_version=_version(version),
        inputs=inputs,
        requested_outputs=outputs,
        id=request_id,
        parameters=params,
    )
    return request, binary_output, binary_flags


def _version(version: str) -> int:
    if not version:
        return -1
    try:
        return int(version)
    except ValueError:
        raise _bad(f"invalid model version '{version}': it must be an integer") from None


def decode_raw(model: str, version: str, spec: ModelSpec, body: memoryview) -> InferenceRequest:
    """A body that is the raw data of a single-input model's only input.

    The data type comes from the config; the shape is the config's dims with
    the batch dimension (or the one variable dimension) taken from the size.
    """
    if len(spec.inputs) != 1:
        raise _bad(
            f"Raw request must only have 1 input (found 1) to be deduced but got "
            f"{len(spec.inputs)} inputs in '{model}' model configuration"
        )
    (ispec,) = spec.inputs.values()
    dims = list(ispec.dims)
    if ispec.datatype is DataType.BYTES:
        count = deserialize_bytes_tensor(body).size
    else:
        if len(body) % ispec.datatype.itemsize:
            raise _bad(
                f"raw input of {len(body)} bytes is not a whole number of {ispec.datatype.value} elements"
            )
        count = len(body) // ispec.datatype.itemsize
    shape = ([-1] if spec.batching else []) + dims
    known = math.prod(d for d in shape if d != -1)
    variable = [i for i, d in enumerate(shape) if d == -1]
    if len(variable) > 1:
        if spec.batching:
            shape[0] = 1
            variable = variable[1:]
        if len(variable) > 1:
            raise _bad(f"cannot infer the shape of raw input '{ispec.name}': it has several variable dims")
    if variable:
        if known == 0 or count % known:
            raise _bad(f"raw input '{ispec.name}' of {count} elements does not fit its dims {dims}")
        shape[variable[0]] = count // known
    array = array_from_buffer(ispec.name, ispec.datatype, shape, body)
    tensor = Tensor(ispec.name, array, ispec.datatype)
    return InferenceRequest(model_name=model, model_version=_version(version), inputs={ispec.name: tensor})


def encode_response(
    response: InferenceResponse, binary_output: bool, binary_flags: dict[str, bool]
) -> tuple[bytes, int | None]:
    """The response body, and the JSON header length when binary data follows."""
    outputs: list[dict[str, Any]] = []
    chunks: list[bytes | memoryview] = []
    for name, tensor in response.outputs.items():
        entry: dict[str, Any] = {
            "name": name,
            "datatype": tensor.datatype.value,
            "shape": list(tensor.data.shape),
        }
        if binary_flags.get(name, binary_output):
            buf = array_to_buffer(tensor.data, tensor.datatype)
            entry["parameters"] = {"binary_data_size": len(buf)}
            chunks.append(buf)
        else:
            entry["data"] = array_to_json(tensor.data, tensor.datatype)
        outputs.append(entry)
    doc: dict[str, Any] = {"model_name": response.model_name, "model_version": str(response.model_version)}
    if response.id:
        doc["id"] = response.id
    if response.parameters:
        doc["parameters"] = response.parameters
    doc["outputs"] = outputs
    header = json.dumps(doc, separators=(",", ":"), allow_nan=True).encode()
    if not chunks:
        return header, None
    return b"".join([header, *chunks]), len(header)
