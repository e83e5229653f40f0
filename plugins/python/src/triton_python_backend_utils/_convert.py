"""pb_utils objects ↔ wire descriptors (used by the stub)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ._api import (
    InferenceRequest,
    InferenceResponse,
    InferenceResponseSender,
    InferenceTrace,
    Tensor,
    TritonError,
    TritonModelException,
)
from ._dtypes import CODES, NAMES
from ._wire import Link, RequestDesc, ResponseDesc


def tensor_to_wire(link: Link, tensor: Tensor) -> Any:
    datatype = NAMES.get(tensor.triton_dtype())
    if datatype is None:
        raise TritonModelException(f"tensor '{tensor.name()}' has no valid data type")
    # A GPU tensor crosses to the server as host data (no CUDA IPC between the processes).
    array = tensor.as_numpy() if tensor.is_cpu() else tensor.to_host()  # type: ignore[attr-defined]
    return link.put(tensor.name(), datatype, array)


def tensor_from_wire(link: Link, desc: Any) -> Tensor:
    return Tensor._checked(desc[0], link.get(desc), CODES[desc[1]])


def response_to_wire(
    link: Link, response: InferenceResponse, wanted: Collection[str] | None = None
) -> ResponseDesc:
    """``response`` for the server; with ``wanted``, only those outputs (the request's
    requested outputs: Triton drops the others, before they cost a copy here)."""
    error = response.error()
    if error is not None:
        return ([], (error.message(), error.code()), response._parameters)
    outputs = [
        tensor_to_wire(link, t) for t in response.output_tensors() if wanted is None or t.name() in wanted
    ]
    return (outputs, None, response._parameters)


def response_from_wire(link: Link, desc: ResponseDesc) -> InferenceResponse:
    outputs, error, parameters = desc
    if error is not None:
        message, code = error
        return InferenceResponse(error=TritonError(message, code), parameters=parameters)
    return InferenceResponse([tensor_from_wire(link, t) for t in outputs], parameters=parameters)


def bls_request_to_wire(link: Link, request: InferenceRequest) -> dict[str, Any]:
    return {
        "m": request.model_name(),
        "v": request.model_version(),
        "i": [tensor_to_wire(link, t) for t in request.inputs()],
        "r": request.requested_output_names(),
        "id": request.request_id(),
        "cid": request.correlation_id(),
        "f": request.flags(),
        "to": request.timeout(),
        "p": request._parameters,
        "tc": request.trace()._context or "",
    }


def request_from_wire(
    link: Link,
    desc: RequestDesc,
    model_name: str,
    version: int,
    make_sender: Callable[[InferenceRequest], InferenceResponseSender | None] | None = None,
) -> InferenceRequest:
    """A request ``execute`` receives; ``make_sender(request)`` makes its response sender
    when the model first asks for one (most never do)."""
    token, rid, correlation_id, flags, timeout, parameters, inputs, outputs, traced = desc
    request = InferenceRequest._received(
        model_name,
        version,
        [tensor_from_wire(link, t) for t in inputs],
        outputs,  # unpickled for this request: its own list
        rid,
        correlation_id,
        flags,
        timeout,
        parameters,
        None,
        make_sender,
    )
    request._token = token
    if traced:  # traced: request.trace() hands it on to BLS requests
        request._trace = InferenceTrace(traced)
    return request
