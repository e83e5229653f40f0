"""Triton's generate extension: ``POST /v2/models/<m>[/versions/<v>]/generate[_stream]``.

A flat JSON object in, a flat JSON object out, for text-oriented (LLM) models.
Each request key names a model input (its value the input's data: datatype
from the config, shape deduced from the config's dims and the number of
values, as Triton does) or else a request parameter; ``"parameters"`` holds
more of either, ``"id"`` is the request id. A response is ``id`` (when set),
``model_name``, ``model_version``, the response parameters, and each output
as a value (one element) or a flat list.

``generate`` answers exactly one response (a model that sends none or several
is an error, as in Triton); ``generate_stream`` sends every response as a
Server-Sent Event, ``data: <json>\\n\\n``, an error mid-stream as
``data: {"error": ...}``; the first response sets the HTTP status. As in
Triton, an error the model answers with (an exception in ``execute``, an error
response) is 400 on both routes, whatever its code; a request refused before it
reaches the model keeps its code's status (404 for an unknown model). A client
that disconnects from a stream cancels its request.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from tritonpy_sdk import InferenceRequest, InferenceResponse, ParameterValue, Tensor, TritonError

from ..codec import array_from_json, array_to_json, request_prefix
from ..runtime.spec import IOSpec
from . import json_body
from .body import read_body
from .errors import error_body, error_response, triton_error_response

if TYPE_CHECKING:
    from ..server import Server

log = logging.getLogger("tritonpy.http")

#: Triton's answer when ``generate`` gets other than one response.
ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, "
    "use generate stream for model that generates various number of responses"
)
EVENT_STREAM = "text/event-stream; charset=utf-8"
#: The status of an error the model answered with, whatever its code: Triton's
#: generate routes answer 400 for every error that comes back as a response (a
#: request refused before it reached the model keeps its own status).
MODEL_ERROR_STATUS = 400

Responses = AsyncGenerator[InferenceResponse, None]


class GenerateFrontend:
    """The two generate routes over ``server``."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def generate(self, request: Request) -> Response:
        responses = await self._start(request)
        answer: InferenceResponse | None = None
        try:
            async for response in responses:
                if answer is not None:  # a second one: give up now (closing cancels the request)
                    raise TritonError.invalid_arg(ONE_RESPONSE)
                answer = response
        finally:
            await responses.aclose()
        if answer is None:
            raise TritonError.invalid_arg(ONE_RESPONSE)
        if answer.error is not None:
            return error_response(answer.error.message, MODEL_ERROR_STATUS)
        return Response(encode_generate(answer), media_type="application/json")

    async def generate_stream(self, request: Request) -> Response:
        return EventStream(await self._start(request))

    async def _start(self, request: Request) -> Responses:
        model = request.path_params["model"]
        version = int(request.path_params.get("version", -1))
        body = await read_body(request, self.server.options.http_max_input_size)
        spec = self.server.model_spec(model, version)
        core_request = decode_generate(model, version, spec, body)
        return self.server.stream_async(core_request)


class EventStream(Response):
    """Server-Sent Events of a request's responses; disconnecting cancels the request.

    Errors before the first response (an invalid request) answer as any other
    endpoint: a JSON error with Triton's status.
    """

    def __init__(self, responses: Responses) -> None:
        self.responses = responses
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pump = asyncio.ensure_future(self._pump(scope, receive, send))
        watch = asyncio.ensure_future(_disconnect(receive))
        try:
            await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            pump.cancel()  # the client left (or the stream ended): stop, cancelling the request
            watch.cancel()
            await asyncio.gather(pump, watch, return_exceptions=True)
        if not pump.cancelled() and pump.exception() is not None:
            log.error("generate_stream failed", exc_info=pump.exception())

    async def _pump(self, scope: Scope, receive: Receive, send: Send) -> None:
        responses = self.responses
        try:
            try:
                first: InferenceResponse | None = await anext(responses)
            except StopAsyncIteration:
                first = None
            except TritonError as exc:
                await triton_error_response(exc)(scope, receive, send)
                return
            status = 200 if first is None or first.error is None else MODEL_ERROR_STATUS
            headers = [(b"content-type", EVENT_STREAM.encode())]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            if first is not None:
                await send({"type": "http.response.body", "body": _event(first), "more_body": True})
            async for response in responses:
                await send({"type": "http.response.body", "body": _event(response), "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await responses.aclose()


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _event(response: InferenceResponse) -> bytes:
    if response.error is not None:
        return b"data: " + error_body(response.error.message) + b"\n\n"
    return b"data: " + encode_generate(response) + b"\n\n"


def encode_generate(response: InferenceResponse) -> bytes:
    """The generate response JSON: reserved keys, then parameters, then outputs (first wins)."""
    doc: dict[str, Any] = {"id": response.id} if response.id else {}
    doc["model_name"] = response.model_name
    doc["model_version"] = str(response.model_version)
    for key, value in response.parameters.items():
        doc.setdefault(key, value)
    for name, tensor in response.outputs.items():
        values = array_to_json(tensor.data, tensor.datatype, name)
        doc.setdefault(name, values[0] if len(values) == 1 else values)
    return json.dumps(doc, separators=(",", ":"), allow_nan=True).encode()


def _bad(message: str) -> TritonError:
    return TritonError.invalid_arg(message)


def decode_generate(model: str, version: int, spec: IOSpec, body: bytes) -> InferenceRequest:
    """The core request for a generate request ``body`` to ``model`` (of config ``spec``)."""

    def no_duplicate_inputs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        doc = dict(pairs)
        if len(doc) != len(pairs):
            # Triton reads an object's first "id" wherever it stands (the request's id, and
            # the one this error names); a key given twice otherwise keeps its last value
            ids = [value for key, value in pairs if key == "id"]
            if ids:
                doc["id"] = ids[0]
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen and key in spec.inputs:
                    prefix = request_prefix(ids[0] if ids else None)
                    raise _bad(f"{prefix}input '{key}' already exists in request")
                seen.add(key)
        return doc

    # As Triton: an empty body is an empty document (refused), not an empty object.
    doc = json_body.loads(body, object_pairs_hook=no_duplicate_inputs)
    if not isinstance(doc, dict):
        raise _bad("attempt to get members for non-object")  # Triton's JSON reader's words
    inputs: dict[str, Tensor] = {}
    params: dict[str, ParameterValue] = {}
    request_id = ""
    for key, value in doc.items():
        if key == "id":
            if not isinstance(value, str):
                raise _bad("Unable to parse 'id': attempt to access JSON non-string as string")
            request_id = value
        elif key == "parameters":
            if key in spec.inputs:
                raise _bad("Keyword 'parameters' for nested schema also given as input tensor name")
            if not isinstance(value, dict):
                raise _bad(
                    "Expected JSON object for keyword: 'parameters': "
                    "attempt to access JSON non-object as object"
                )
            for name, item in value.items():
                try:
                    _take(spec, name, item, inputs, params)
                except TritonError as exc:
                    raise _bad(f"Converting keyword: 'parameters': {exc.message}") from None
        else:
            _take(spec, key, value, inputs, params)
    return InferenceRequest(
        model_name=model, model_version=version, inputs=inputs, id=request_id, parameters=params
    )


def _take(
    spec: IOSpec, key: str, value: Any, inputs: dict[str, Tensor], params: dict[str, ParameterValue]
) -> None:
    """``key: value`` as the input of that name, else as a request parameter."""
    ispec = spec.inputs.get(key)
    if ispec is None:
        if not isinstance(value, bool | int | float | str):
            raise _bad(f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'.")
        params[key] = value
        return
    if key in inputs:
        raise _bad(f"input '{key}' already exists in request")
    count = len(value) if isinstance(value, list) else 1
    shape = _deduce_shape(key, ispec.full_shape(spec.batching), count)
    inputs[key] = Tensor(key, array_from_json(key, ispec.datatype, shape, value), ispec.datatype)


def _deduce_shape(name: str, dims: list[int], count: int) -> list[int]:
    """Triton's rule: fixed dims take their share of ``count``; the innermost variable
    dim takes what is left, any other variable dim is 1."""
    shape = list(dims)
    rest = count
    for d in reversed(shape):
        if d != -1:
            if d == 0 or rest % d:
                raise _bad(f"The schema can not convert input '{name}' to tensor with proper shape")
            rest //= d
    for i in reversed(range(len(shape))):
        if shape[i] == -1:
            shape[i], rest = rest, 1
    if rest != 1:
        raise _bad(f"The schema can not convert input '{name}' to tensor with proper shape")
    return shape
