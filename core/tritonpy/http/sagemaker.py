"""Triton's SageMaker front end (``--allow-sagemaker``): the routes Amazon SageMaker calls
on ``--sagemaker-port`` (8080), for single-model and multi-model endpoints.

- ``GET /ping``: 200 (empty) when the server is ready, 400 when not; with
  ``SAGEMAKER_TRITON_PING_MODE=live``, when it is live.
- ``POST /invocations``: an inference of ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``, as
  ``SAGEMAKER_TRITON_INFERENCE_TYPE`` says: ``infer`` (the KServe v2 request, default),
  ``generate`` or ``generate_stream``. Binary data is announced in the content type,
  ``application/vnd.sagemaker-triton.binary+json;json-header-size=<n>``, both ways;
  the body is never compressed. A model's failure answers 400 (507 when memory ran
  out), as Triton's SageMaker front end answers it; a request the server refuses,
  its usual status.
- ``/models`` and ``/models/<hash>[/invoke]``: SageMaker's multi-model endpoint
  (``sagemaker_mme.py``; loads need ``--model-control-mode=explicit``). An
  invocation's failures all answer 400, or 507 when memory ran out.
- Any other path: 400, empty.

Restricted API groups (``--http-restricted-api``) apply: ``/ping`` is ``health``,
the invocations ``inference``, the other multi-model routes ``model-repository``.

Answers are labelled as Triton labels them (``text/plain`` where its SageMaker server
writes nothing else).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from tritonpy_sdk import TritonError

from ..failures import report
from ..model_version import parse_version
from .body import read_body, request_chunks
from .errors import bare, error_response, not_allowed, triton_error_response
from .generate import GenerateFrontend
from .inference import DECOUPLED_REFUSAL, HttpInference, encode_infer
from .sagemaker_mme import MODELS_ROUTE, TARGET_MODEL, MultiModelEndpoint, failure_response
from .tensors import HEADER_LENGTH, binary_json_size

if TYPE_CHECKING:
    from ..server import Server

log = logging.getLogger(__name__)

#: The content type of a body with binary data: the JSON part's length follows it.
BINARY_MIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="
#: What ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` is when it is not set (Triton's).
UNSPECIFIED_MODEL = "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
_INFERENCE_TYPES = ("infer", "generate", "generate_stream")


def _atoi(text: str) -> int:
    """C's ``atoi``, which Triton reads the header size with: leading digits (and sign), else 0."""
    text = text.lstrip()
    sign = -1 if text[:1] == "-" else 1
    digits = text[1:] if text[:1] in "+-" else text
    n = 0
    for ch in digits:
        if not ch.isdigit():
            break
        n = n * 10 + int(ch)
    return sign * n


def sagemaker_group(path: str) -> str | None:
    """The restricted API group of a SageMaker route."""
    if path == "/ping":
        return "health"
    if path == "/invocations":
        return "inference"
    route = MODELS_ROUTE.fullmatch(path)
    if route is None:
        return None
    return "inference" if route.group(2) else "model-repository"


class SagemakerApp:
    """The ASGI application of the SageMaker front end for ``server``."""

    def __init__(self, server: Server, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.server = server
        self.ping_mode = env.get("SAGEMAKER_TRITON_PING_MODE", "ready")
        self.model = env.get("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", UNSPECIFIED_MODEL)
        self.inference_type = env.get("SAGEMAKER_TRITON_INFERENCE_TYPE", "infer")
        if self.inference_type not in _INFERENCE_TYPES:
            raise TritonError.invalid_arg(
                f"SAGEMAKER_TRITON_INFERENCE_TYPE '{self.inference_type}' is not one of "
                f"{', '.join(_INFERENCE_TYPES)}"
            )
        self.inference = HttpInference(server)
        self.generate = GenerateFrontend(server)
        self.models = MultiModelEndpoint(server, server.options.sagemaker_models_root)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        try:
            response = await self._route(request)
        except ClientDisconnect:
            return
        except TritonError as exc:
            response = triton_error_response(exc)
        except Exception as exc:  # a bug must not take the server down; say what failed
            response = error_response(report(log, f"unhandled error in SageMaker {scope['path']}", exc), 500)
        await response(scope, receive, send)

    async def _route(self, request: Request) -> Response:
        path, method = request.url.path, request.method
        if path == "/ping":
            if method != "GET":
                return not_allowed()
            ok = self.server.live() if self.ping_mode == "live" else self.server.ready()
            return bare(200 if ok else 400)
        if path == "/invocations":
            if method != "POST":
                return not_allowed()
            if self.inference_type == "infer":
                return await self._infer(request)
            request.scope["path_params"] = {"model": self.model}
            if self.inference_type == "generate":
                return await self.generate.generate(request)
            return await self.generate.generate_stream(request)
        route = MODELS_ROUTE.fullmatch(path)
        if route is not None:
            return await self._multi_model(request, route.group(1) or "", route.group(2) is not None)
        return bare(400)

    async def _infer(self, request: Request, model: str | None = None) -> Response:
        """An inference of ``model`` (multi-model: every failure is the model's) or, when
        None, of the default model (a request the server refuses: its usual status)."""
        multi_model = model is not None
        name = self.model if model is None else model
        chunks = await request_chunks(request, self.inference.max_input)
        size = sum(len(c) for c in chunks)
        headers: dict[str, str] = {}
        try:
            given = binary_json_size(request.headers.get("content-type", ""), BINARY_MIME)
            if given is not None:
                length = _atoi(given)
                if length < 0 or length > size:
                    raise TritonError.invalid_arg(
                        f"inference header size should be in range (0, {size}), got: {given}"
                    )
                headers[HEADER_LENGTH] = str(length)
        except TritonError as exc:
            return failure_response(exc) if multi_model else error_response(exc.message, 400, "text/plain")
        try:
            self.server.model_spec(name, parse_version(""))  # an unknown model: 404, as Triton
            core_request, binary, flags = self.inference.decode(name, "", chunks, headers)
        except TritonError as exc:
            if multi_model:
                return failure_response(exc)
            raise
        try:
            response = await self.server.infer_async(core_request, DECOUPLED_REFUSAL)
        except TritonError as exc:  # the model's failure: Triton's SageMaker front end answers 400 (507)
            return failure_response(exc)
        parts, extra, media_type = encode_infer(response, binary, flags, "")
        length_header = extra.pop("Inference-Header-Content-Length", None)
        if length_header is not None:
            media_type = BINARY_MIME + length_header
        return Response(b"".join(parts), headers={**extra, "content-type": media_type})

    async def _multi_model(self, request: Request, name: str, invoke: bool) -> Response:
        """SageMaker's multi-model routes, as Triton routes ``/models[/<name>][/invoke]``."""
        method = request.method
        target = request.headers.get(TARGET_MODEL)
        if method == "GET":
            return self.models.get(name) if name else self.models.list()
        if method == "POST" and invoke:
            model = self.models.target(name, target)
            if model is None:
                return bare(404)
            log.info("Invoking SageMaker TargetModel: %s", model)
            return await self._infer(request, model)
        if method == "POST":
            return await self.models.load(await read_body(request, self.inference.max_input), target)
        if method == "DELETE":
            return await self.models.unload(name, target)
        return bare(400)
