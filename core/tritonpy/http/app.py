"""The KServe v2 REST routes (plus Triton's extensions) over a ``Server``.

Every handler only translates: the server validates and runs. A TritonError
becomes ``{"error": ...}`` with Triton's status; anything unexpected is logged
and answered 500, and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from tritonpy_sdk import TritonError

from ..failures import report
from ..memory.cuda import IPC_HANDLE_SIZE
from ..memory.shared import check_client_shm
from ..model_version import is_version, parse_version
from ..repository.overrides import FILE_PREFIX, refuse_repository_name, split_load_parameters
from ..server import Server
from . import json_body
from .body import read_body, request_chunks
from .errors import bare, error_response, triton_error_response
from .fastpath import ASGIApp, InferFastPath
from .generate import GenerateFrontend
from .inference import HttpInference
from .restricted import RestrictedApi

log = logging.getLogger("tritonpy.http")

Handler = Callable[[Request], Awaitable[Response]]


def _json(data: Any, status: int = 200) -> Response:
    body = json.dumps(data, separators=(",", ":"))
    return Response(body, status_code=status, media_type="application/json")


def _health(ok: bool) -> Response:
    """A health answer: no body, 200 or 400, labelled ``text/plain`` as Triton labels it."""
    return bare(200 if ok else 400)


def _done() -> Response:
    """Triton's answer to a control call that succeeded (load, unload, region registration)."""
    return Response(status_code=200, media_type="application/json")


def _guarded(handler: Handler) -> Handler:
    """Turn TritonError into its HTTP error and any other exception into a logged 500."""

    @functools.wraps(handler)
    async def wrapper(request: Request) -> Response:
        try:
            return await handler(request)
        except HTTPException:
            raise  # routing answers (404, 405): starlette's handler writes them
        except ClientDisconnect:  # the client left (or its body timed out): nobody to answer
            return Response(status_code=400)
        except TritonError as exc:
            return triton_error_response(exc)
        except Exception as exc:  # a bug must not take the server down; say what failed
            message = report(log, f"unhandled error in {request.method} {request.url.path}", exc)
            return error_response(message, 500)

    return wrapper


class HttpFrontend:
    """Route handlers bound to one server."""

    def __init__(self, inference: HttpInference) -> None:
        self.inference = inference
        self.server = inference.server
        self.max_input = inference.max_input

    # -- health and metadata --------------------------------------------------------

    async def live(self, request: Request) -> Response:
        return _health(self.server.live())

    async def ready(self, request: Request) -> Response:
        return _health(self.server.ready())

    async def server_metadata(self, request: Request) -> Response:
        return _json(self.server.metadata())

    async def model_metadata(self, request: Request) -> Response:
        p = request.path_params
        return _json(self.server.model_metadata(p["model"], _number(p)))

    async def model_ready(self, request: Request) -> Response:
        p = request.path_params
        if await self.server.model_ready_async(p["model"], _number(p)):
            return _health(True)
        return error_response("Model version not ready", 400, "text/plain")

    async def model_config(self, request: Request) -> Response:
        p = request.path_params
        return _json(self.server.model_config(p["model"], _number(p)))

    async def statistics(self, request: Request) -> Response:
        p = request.path_params
        stats = self.server.model_statistics(p.get("model", ""), _number(p))
        return _json({"model_stats": stats})

    async def logging_get(self, request: Request) -> Response:
        return _json(self.server.log_settings.get())

    async def logging_post(self, request: Request) -> Response:
        doc = _parse_object(await read_body(request, self.max_input))
        return _json(self.server.log_settings.update(doc))

    async def trace_get(self, request: Request) -> Response:
        return _json(self.server.trace_settings(request.path_params.get("model", "")))

    async def trace_post(self, request: Request) -> Response:
        doc = _parse_object(await read_body(request, self.max_input))
        _check_trace_json(doc)
        return _json(self.server.trace_settings(request.path_params.get("model", ""), doc))

    async def repository_index(self, request: Request) -> Response:
        doc = _parse_object(await read_body(request, self.max_input))
        ready = doc.get("ready", False)
        if not isinstance(ready, bool):  # Triton's words (a 500 there)
            raise TritonError.invalid_arg("attempt to access JSON non-boolean as boolean")
        return _json(self.server.repository_index(ready=ready))

    async def load(self, request: Request) -> Response:
        refuse_repository_name(request.path_params.get("repository", ""))
        name = request.path_params["model"]
        config, files = _load_parameters(name, _parse_object(await read_body(request, self.max_input)))
        # A load takes as long as the model takes to initialize: off the event loop.
        await asyncio.to_thread(self.server.load_model, name, config, files)
        return _done()

    async def unload(self, request: Request) -> Response:
        refuse_repository_name(request.path_params.get("repository", ""))
        params = _parameters(_parse_object(await read_body(request, self.max_input)))
        dependents = params.get("unload_dependents", False)
        if not isinstance(dependents, bool):
            raise TritonError.invalid_arg("the 'unload_dependents' parameter must be true or false")
        await asyncio.to_thread(self.server.unload_model, request.path_params["model"], dependents)
        return _done()

    # -- shared memory -----------------------------------------------------------------

    async def shm_status(self, request: Request) -> Response:
        return _json(self.server.shared_memory.status(request.path_params.get("region")))

    async def _register_body(self, request: Request) -> Any:
        """A shared-memory register request's JSON document (None when the body is empty:
        the field checks then name what is missing, as Triton's do)."""
        body = await read_body(request, self.max_input)
        return json_body.loads(body) if body.strip() else None

    async def shm_register(self, request: Request) -> Response:
        check_client_shm(self.server.options.allow_client_shm)
        name = request.path_params["region"]
        key, offset, byte_size = register_fields(await self._register_body(request))
        self.server.shared_memory.register(name, key, offset, byte_size)
        return _done()

    async def shm_unregister(self, request: Request) -> Response:
        check_client_shm(self.server.options.allow_client_shm)
        self.server.shared_memory.unregister(request.path_params.get("region"))
        return _done()

    async def cuda_shm_status(self, request: Request) -> Response:
        return _json(self.server.shared_memory.cuda_status(request.path_params.get("region")))

    async def cuda_shm_register(self, request: Request) -> Response:
        check_client_shm(self.server.options.allow_client_shm)
        name = request.path_params["region"]
        raw_handle, device_id, byte_size = cuda_register_fields(await self._register_body(request))
        await asyncio.to_thread(
            self.server.shared_memory.register_cuda, name, raw_handle, device_id, byte_size
        )
        return _done()

    async def cuda_shm_unregister(self, request: Request) -> Response:
        check_client_shm(self.server.options.allow_client_shm)
        self.server.shared_memory.unregister_cuda(request.path_params.get("region"))
        return _done()

    # -- inference ---------------------------------------------------------------------

    async def infer(self, request: Request) -> Response:
        # Only reached for paths the ASGI fast path does not take (it serves every
        # well-formed inference path), so this answers what Triton answers for them.
        p = request.path_params
        version = _version(p)
        chunks = await request_chunks(request, self.max_input)
        parts, headers, media_type = await self.inference.run(p["model"], version, chunks, request.headers)
        return Response(b"".join(parts), media_type=media_type, headers=headers)


def _check_trace_json(doc: dict[str, Any]) -> None:
    """The JSON types Triton 2.51 reads a trace setting update with, in its words (400
    here, 500 there): ``trace_level`` an array of strings, every other setting a
    string; null clears a model's override."""
    for key, value in doc.items():
        if value is None:
            continue
        if key == "trace_level":
            if not isinstance(value, list):
                raise TritonError.invalid_arg("attempt to access JSON non-array as array")
            if not all(isinstance(v, str) for v in value):
                raise TritonError.invalid_arg("attempt to access JSON non-string as string")
        elif not isinstance(value, str):
            raise TritonError.invalid_arg("attempt to access JSON non-string as string")


def _version(path_params: dict[str, Any]) -> str:
    """The version segment of a model path ('' when absent).

    Triton's routes accept only digits there; anything else is an unknown path.
    """
    version: str = path_params.get("version", "")
    if version and not is_version(version):
        raise HTTPException(404)
    return version


def _number(path_params: dict[str, Any]) -> int:
    """The version of a model path as Triton reads it (-1: none, the latest; digits too
    many for a ``long`` are refused in Triton's words)."""
    return parse_version(_version(path_params))


def register_fields(doc: Any) -> tuple[str, int, int]:
    """``(key, offset, byte_size)`` of a system shared-memory register body, with
    Triton's messages (Triton answers 500 for a wrong type; a client's mistake is a 400)."""
    if not isinstance(doc, dict) or "key" not in doc:
        raise TritonError.invalid_arg("Shared memory register request has no 'key' field")
    # In Triton's order (observed): the key's type, the offset, then the byte size.
    key = doc["key"]
    if not isinstance(key, str):
        raise TritonError.invalid_arg("attempt to access JSON non-string as string")
    offset = _register_uint(doc.get("offset", 0))
    if "byte_size" not in doc:
        raise TritonError.invalid_arg("Shared memory register request has no 'byte_size' field")
    return key, offset, _register_uint(doc["byte_size"])


def _register_uint(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise TritonError.invalid_arg("attempt to access JSON non-unsigned-integer as unsigned-integer")
    return value


def cuda_register_fields(doc: Any) -> tuple[bytes, int, int]:
    """``(raw_handle, device_id, byte_size)`` of a CUDA shared-memory register body,
    checked in Triton's order with its messages (its 500s are 400s here, as above)."""
    if not isinstance(doc, dict) or "raw_handle" not in doc:
        raise TritonError.invalid_arg("Shared memory register request has no 'raw_handle' field")
    handle = doc["raw_handle"]
    if not isinstance(handle, dict) or "b64" not in handle:
        raise TritonError.invalid_arg("attempt to access non-existing object member 'b64'")
    if not isinstance(handle["b64"], str):
        raise TritonError.invalid_arg("attempt to access JSON non-string as string")
    for member in ("byte_size", "device_id"):
        if member not in doc:
            raise TritonError.invalid_arg(f"attempt to access non-existing object member '{member}'")
    for value in (doc["byte_size"], doc["device_id"]):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
            raise TritonError.invalid_arg("attempt to access JSON non-unsigned-integer as unsigned-integer")
    try:
        raw = base64.b64decode(handle["b64"], validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != IPC_HANDLE_SIZE:
        raise TritonError.invalid_arg("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
    return raw, doc["device_id"], doc["byte_size"]


def _parse_object(body: bytes) -> dict[str, Any]:
    """A JSON object body (empty body = {}), or a 400."""
    if not body.strip():
        return {}
    doc = json_body.loads(body)
    if not isinstance(doc, dict):
        raise TritonError.invalid_arg("the request body must be a JSON object")
    return doc


def _parameters(doc: dict[str, Any]) -> dict[str, Any]:
    params = doc.get("parameters", {})
    if not isinstance(params, dict):
        raise TritonError.invalid_arg("'parameters' must be a JSON object")
    return params


def _load_parameters(model: str, doc: dict[str, Any]) -> tuple[str, dict[str, bytes]]:
    """A load body's ``config`` and ``file:<path>`` parameters (file contents in base64)."""
    decoded: dict[str, Any] = {}
    for key, value in _parameters(doc).items():
        if key.startswith(FILE_PREFIX):
            if not isinstance(value, str):
                raise TritonError.invalid_arg(
                    f"failed to load '{model}': file parameter '{key}' must be a base64 string"
                )
            try:
                value = base64.b64decode(value, validate=True)
            except binascii.Error as exc:
                raise TritonError.invalid_arg(
                    f"failed to load '{model}': file parameter '{key}' is not valid base64: {exc}"
                ) from None
        decoded[key] = value
    return split_load_parameters(model, decoded)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {404: "Not Found", 405: "Method Not Allowed"}
    return error_response(messages.get(exc.status_code, exc.detail), exc.status_code, "text/plain")


def create_app(server: Server) -> ASGIApp:
    """The ASGI application of the HTTP front end for ``server``."""
    inference = HttpInference(server)
    f = HttpFrontend(inference)
    model = "/v2/models/{model}"
    versioned = "/v2/models/{model}/versions/{version}"
    routes = [
        Route("/v2/health/live", _guarded(f.live), methods=["GET"]),
        Route("/v2/health/ready", _guarded(f.ready), methods=["GET"]),
        Route("/v2", _guarded(f.server_metadata), methods=["GET"]),
        Route("/v2/models/stats", _guarded(f.statistics), methods=["GET"]),
        Route("/v2/logging", _guarded(f.logging_get), methods=["GET"]),
        Route("/v2/logging", _guarded(f.logging_post), methods=["POST"]),
        Route("/v2/trace/setting", _guarded(f.trace_get), methods=["GET"]),
        Route("/v2/trace/setting", _guarded(f.trace_post), methods=["POST"]),
        Route("/v2/models/{model}/trace/setting", _guarded(f.trace_get), methods=["GET"]),
        Route("/v2/models/{model}/trace/setting", _guarded(f.trace_post), methods=["POST"]),
    ]
    # A repository's name in the path: the index ignores it and load/unload refuse it
    # (UNSUPPORTED), as Triton does.
    for prefix in ("/v2/repository", "/v2/repository/{repository}"):
        routes += [
            Route(prefix + "/index", _guarded(f.repository_index), methods=["POST"]),
            Route(prefix + "/models/{model}/load", _guarded(f.load), methods=["POST"]),
            Route(prefix + "/models/{model}/unload", _guarded(f.unload), methods=["POST"]),
        ]
    for prefix in ("/v2/systemsharedmemory", "/v2/systemsharedmemory/region/{region}"):
        routes += [
            Route(prefix + "/status", _guarded(f.shm_status), methods=["GET"]),
            Route(prefix + "/unregister", _guarded(f.shm_unregister), methods=["POST"]),
        ]
    for prefix in ("/v2/cudasharedmemory", "/v2/cudasharedmemory/region/{region}"):
        routes += [
            Route(prefix + "/status", _guarded(f.cuda_shm_status), methods=["GET"]),
            Route(prefix + "/unregister", _guarded(f.cuda_shm_unregister), methods=["POST"]),
        ]
    register = "/region/{region}/register"
    routes += [
        Route("/v2/systemsharedmemory" + register, _guarded(f.shm_register), methods=["POST"]),
        Route("/v2/cudasharedmemory" + register, _guarded(f.cuda_shm_register), methods=["POST"]),
    ]
    for prefix in (model, versioned):
        routes += [
            Route(prefix, _guarded(f.model_metadata), methods=["GET"]),
            Route(prefix + "/ready", _guarded(f.model_ready), methods=["GET"]),
            Route(prefix + "/config", _guarded(f.model_config), methods=["GET"]),
            Route(prefix + "/stats", _guarded(f.statistics), methods=["GET"]),
            Route(prefix + "/infer", _guarded(f.infer), methods=["POST"]),
        ]
    g = GenerateFrontend(server)
    for prefix in (model, "/v2/models/{model}/versions/{version:int}"):  # digits only, as Triton
        routes += [
            Route(prefix + "/generate", _guarded(g.generate), methods=["POST"]),
            Route(prefix + "/generate_stream", _guarded(g.generate_stream), methods=["POST"]),
        ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.router.redirect_slashes = False  # Triton answers 404 for a trailing slash, not a redirect
    served: ASGIApp = InferFastPath(inference, app)
    if server.http_restrictions:  # outermost, so the fast path is covered; absent, it costs nothing
        served = RestrictedApi(served, server.http_restrictions)
    return served
