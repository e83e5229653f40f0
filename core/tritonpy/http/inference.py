"""One HTTP inference: its body decoded into a request, run, its response encoded.

Shared by whatever carries ``POST /v2/models/<m>[/versions/<v>]/infer``: the
protocol itself (``direct.py``), the ASGI fast path (``fastpath.py``) and the
starlette route (``app.py``), so all three answer alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from tritonpy_sdk import InferenceRequest, InferenceResponse, TritonError

from ..codec import InputSizes
from ..forwarding import forward_headers, header_pattern
from ..model_version import parse_version
from ..runtime.validation import size_error
from ..trace import FrontEnd, Tracer, no_front
from .compression import choose_encoding, compress, decompress
from .tensors import HEADER_LENGTH, Body, Placement, decode_raw, decode_request, encode_response

if TYPE_CHECKING:
    from ..server import Server

#: Triton's answer over HTTP to an inference of a decoupled model.
DECOUPLED_REFUSAL = "HTTP end point doesn't support models with decoupled transaction policy"

#: The request headers that an inference over HTTP reads: ``HttpInference.decode`` and
#: ``run`` (Content-Encoding, the binary header's length, a trace context), the body's
#: declared size and the response's compression. The protocol's direct path hands
#: ``decode`` only these (``direct.DirectInfer``), and those ``forward`` finds: a header
#: read here must be listed.
REQUEST_HEADERS = frozenset(
    {"content-length", "content-encoding", "accept-encoding", HEADER_LENGTH, "traceparent"}
)

#: A decoded inference: the request, whether every output goes back in binary,
#: and the per-output placements (binary or not, or a shared-memory slot).
Decoded = tuple[InferenceRequest, bool, dict[str, Placement]]


def encode_infer(
    response: InferenceResponse, binary_output: bool, binary_flags: dict[str, Placement], accept_encoding: str
) -> tuple[Body, dict[str, str], str]:
    """An inference response as (body parts, extra headers, media type)."""
    parts, json_length = encode_response(response, binary_output, binary_flags)
    headers: dict[str, str] = {}
    media_type = "application/json"
    if json_length is not None:
        headers["Inference-Header-Content-Length"] = str(json_length)
        media_type = "application/octet-stream"
    encoding = choose_encoding(accept_encoding) if accept_encoding else None
    if encoding is not None:
        parts = [compress(b"".join(parts), encoding)]
        headers["Content-Encoding"] = encoding
    return parts, headers, media_type


class HttpInference:
    """Inference requests over HTTP to one server."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.max_input = server.options.http_max_input_size
        #: ``--http-header-forward-pattern``: headers that become request parameters.
        self.forward = header_pattern(
            server.options.http_header_forward_pattern, "--http-header-forward-pattern"
        )
        # The front end's stamps for a request that begins to arrive now, while tracing is on
        # (none in a front-end worker: the core traces its requests without them).
        tracer: Tracer | None = getattr(server, "tracer", None)
        self.front: Callable[[], FrontEnd | None] = (
            functools.partial(tracer.front, "HTTP") if tracer is not None else no_front
        )

    def decode(self, model: str, version: str, chunks: list[bytes], headers: Mapping[str, str]) -> Decoded:
        """The request of a body read as ``chunks`` (at least one) with ``headers``; a W3C
        ``traceparent`` header becomes its trace context (OpenTelemetry tracing), and the
        headers ``forward`` finds become its parameters."""
        decoded = self._decode(model, version, chunks, headers)
        traceparent = headers.get("traceparent")
        if traceparent:
            decoded[0].trace_context = traceparent
        if self.forward is not None:
            forward_headers(self.forward, headers.items(), decoded[0].parameters)
        return decoded

    def _decode(self, model: str, version: str, chunks: list[bytes], headers: Mapping[str, str]) -> Decoded:
        """The request of a body read as ``chunks`` (at least one) with ``headers``.

        A body that does not decode is reported as Triton does: an unknown model
        (or version) first, whatever the body holds; only then the body's fault.
        """
        try:
            # body.join, inline: this is every inference's path.
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            encoding = headers.get("content-encoding")
            if encoding:
                body = decompress(body, encoding, self.max_input)
            view = memoryview(body)
            header_length = headers.get(HEADER_LENGTH)
            if header_length is not None:
                n = int(header_length) if header_length.isdigit() else -1
                if n < 0 or n > len(body):
                    raise TritonError.invalid_arg(
                        f"inference header size should be in range (0, {len(body)}), got: {header_length}"
                    )
            elif view:
                return decode_request(model, version, view, view[len(view) :], self.server.shared_memory)
            else:
                n = 0  # as Triton: an empty body is a raw request of no data, not empty JSON
            if n == 0:
                # Raw binary request: the body is the single input's data; Triton
                # answers it with every output in binary.
                spec = self.server.model_spec(model, parse_version(version))
                return decode_raw(model, version, spec, view), True, {}
            return decode_request(model, version, view[:n], view[n:], self.server.shared_memory)
        except Exception as exc:
            # Outside the except block: the lookup's error must not chain the body's.
            error = exc
        # The version's and the lookup's errors first, as Triton's.
        spec = self.server.model_spec(model, parse_version(version))
        if isinstance(error, InputSizes):
            raise size_error(spec, error)  # what Triton finds first, the sizes in their turn
        raise error

    async def run(
        self,
        model: str,
        version: str,
        chunks: list[bytes],
        headers: Mapping[str, str],
        front: FrontEnd | None = None,
    ) -> tuple[Body, dict[str, str], str]:
        """Decode, run and encode one inference: (body parts, extra headers, media type)."""
        request, binary_output, binary_flags = self.decode(model, version, chunks, headers)
        response = await self.server.infer_async(request, DECOUPLED_REFUSAL, front)
        return encode_infer(response, binary_output, binary_flags, headers.get("accept-encoding", ""))
