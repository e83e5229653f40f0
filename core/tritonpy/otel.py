"""OpenTelemetry export of traces (``--trace-config mode=opentelemetry``), as Triton does it.

Triton's spans, per traced request:

- ``InferRequest``: the top-level span of a request that came from a client; its
  parent is the client's span when the request carried a W3C ``traceparent``
  (an HTTP header, or gRPC metadata), with the front end's events: ``HTTP_RECV_START``,
  ``HTTP_RECV_END``, ``INFER_RESPONSE_COMPLETE`` (per response it was handed),
  ``HTTP_SEND_START``, ``HTTP_SEND_END`` (gRPC: ``GRPC_WAITREAD_*``, ``GRPC_SEND_*``).
- ``<model name>``: the model span, child of ``InferRequest``, with the
  attributes ``triton.model_name``, ``triton.model_version``,
  ``triton.trace_id``, ``triton.trace_parent_id`` and ``triton.request_id``, and
  the events ``REQUEST_START``, ``QUEUE_START``, ``REQUEST_END``. An ensemble's
  step and a BLS request get their own model span as a child of the calling
  request's model span (no ``InferRequest`` of their own).
- ``compute``: child of the model span, with the events ``COMPUTE_START``,
  ``COMPUTE_INPUT_END``, ``COMPUTE_OUTPUT_START``, ``COMPUTE_END``.
- A backend's custom activities (``InferenceRequest.report_activity``): a span per
  ``X_START`` … ``X_END`` pair, nested as reported, under the model span; other
  names are events of the innermost open one.

Spans go through the SDK's batch span processor to an OTLP/HTTP exporter: the
request path only appends to the processor's queue, and export (and a
collector that does not answer) happens on the processor's own thread. The
SDK is the optional extra ``tritonpy[otel]``, imported only in this mode.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

INSTALL = "pip install 'tritonpy[otel]'"

#: Events on the model span and on the compute span; the front end's (``trace.FRONT_STAMPS``)
#: go on ``InferRequest``, any other name is a backend's custom activity.
_MODEL_EVENTS = frozenset({"REQUEST_START", "QUEUE_START", "REQUEST_END"})
_COMPUTE_EVENTS = frozenset({"COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"})


@dataclass
class OtelConfig:
    """``--trace-config opentelemetry,<key>=<value>``: Triton's settings and defaults."""

    url: str = "http://localhost:4318/v1/traces"
    resource: dict[str, str] = field(default_factory=dict)
    bsp_max_queue_size: int = 2048
    bsp_schedule_delay: int = 5000  # milliseconds
    bsp_max_export_batch_size: int = 512

    def set(self, key: str, value: str) -> None:
        """One flag's setting; ``ValueError`` with the reason when it is not one."""
        if key == "url":
            self.url = value
        elif key == "resource":
            name, sep, attr = value.partition("=")
            if not sep or not name:
                raise ValueError("expects resource=<key>=<value>")
            self.resource[name] = attr
        elif key in ("bsp_max_queue_size", "bsp_schedule_delay", "bsp_max_export_batch_size"):
            number = int(value)
            if number < (0 if key == "bsp_schedule_delay" else 1):
                raise ValueError(f"'{key}' must be a positive number, got {value}")
            setattr(self, key, number)
        else:
            raise ValueError(f"unknown opentelemetry setting '{key}'")

    def check(self) -> None:
        if self.bsp_max_export_batch_size > self.bsp_max_queue_size:
            raise ValueError(
                f"bsp_max_export_batch_size ({self.bsp_max_export_batch_size}) must not exceed "
                f"bsp_max_queue_size ({self.bsp_max_queue_size})"
            )


def traceparent(span: Any) -> str:
    """The W3C ``traceparent`` value naming ``span`` as a parent."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


@dataclass(slots=True)
class Spans:
    """The open spans of one traced request."""

    model: Any
    root: Any = None

    def context(self) -> str:
        """The ``traceparent`` that makes a request this one submits (BLS, a step) its child."""
        return traceparent(self.model)


class OtelExporter:
    """A tracer provider of the server's own (never the process-global one)."""

    def __init__(self, config: OtelConfig) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.trace import SpanKind
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError as exc:
            raise RuntimeError(
                f"trace mode 'opentelemetry' needs the OpenTelemetry SDK ({exc.name} is not installed): "
                f"{INSTALL}"
            ) from None
        config.check()
        attributes = {"service.name": "triton-inference-server", **config.resource}
        # Resource.create also reads OTEL_RESOURCE_ATTRIBUTES; the flags win, as in Triton.
        self._provider = TracerProvider(resource=Resource.create(attributes))
        self._processor = BatchSpanProcessor(
            OTLPSpanExporter(endpoint=config.url),
            max_queue_size=config.bsp_max_queue_size,
            schedule_delay_millis=config.bsp_schedule_delay,
            max_export_batch_size=config.bsp_max_export_batch_size,
        )
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer("triton-server")
        self._kind = SpanKind.SERVER
        self._propagator = TraceContextTextMapPropagator()
        # Stamps are monotonic nanoseconds (differences matter); spans want the epoch.
        self._offset = time.time_ns() - time.monotonic_ns()

    def start(self, model: str, parent: str, internal: bool, since: int | None = None) -> Spans:
        """Open a request's spans. ``parent``: a ``traceparent`` value, or ""; ``internal``:
        the request was made by another one (an ensemble step, BLS), whose model span
        ``parent`` names; ``since``: when the front end began to receive it (a stamp), where
        ``InferRequest`` starts."""
        context = self._propagator.extract({"traceparent": parent}) if parent else None
        now = time.time_ns()
        root = None
        if not internal:
            began = now if since is None else since + self._offset
            root = self._tracer.start_span("InferRequest", context, self._kind, start_time=began)
            from opentelemetry.trace import set_span_in_context

            context = set_span_in_context(root)
        span = self._tracer.start_span(model, context, self._kind, start_time=now)
        return Spans(span, root)

    def finish(
        self,
        spans: Spans,
        stamps: list[tuple[str, int]],
        attributes: dict[str, Any],
    ) -> None:
        """Add the request's events and attributes and end its spans (its model span at
        REQUEST_END, a compute span from COMPUTE_START to COMPUTE_END, a backend's custom
        activities as ``_custom`` makes them)."""
        from opentelemetry.trace import set_span_in_context

        from .trace import FRONT_STAMPS

        offset = self._offset
        model = spans.model
        model.set_attributes(attributes)
        compute: list[tuple[str, int]] = []
        custom: list[tuple[str, int]] = []
        end = None
        root = spans.root
        root_end = None
        for name, ns in stamps:
            if name in FRONT_STAMPS:
                (root or model).add_event(name, timestamp=ns + offset)
                root_end = max(root_end or 0, ns + offset)
            elif name in _MODEL_EVENTS:
                model.add_event(name, timestamp=ns + offset)
                if name == "REQUEST_END":
                    end = ns + offset
            elif name in _COMPUTE_EVENTS:
                compute.append((name, ns + offset))
            else:
                custom.append((name, ns + offset))
        if compute:
            span = self._tracer.start_span(
                "compute", set_span_in_context(model), self._kind, start_time=compute[0][1]
            )
            for name, ns in compute:
                span.add_event(name, timestamp=ns)
            span.end(end_time=compute[-1][1])
        if custom:
            self._custom(model, custom, end)
        model.end(end_time=end)
        if root is not None:  # it ends once the front end sent its answer, as Triton's
            root.end(end_time=max(end or 0, root_end or 0) or None)

    def _custom(self, model: Any, activities: list[tuple[str, int]], end: int | None) -> None:
        """A backend's custom activities (``InferenceRequest.report_activity``), in the order
        reported, as Triton's tracer nests them: ``X_START`` opens a span ``X`` (child of the
        innermost one open, else of the model span) and ``X_END`` closes the innermost, each
        an event of its span; any other name is an event of the innermost open span, else of
        the model span. A span never closed ends with the request."""
        from opentelemetry.trace import set_span_in_context

        stack: list[Any] = []
        for name, ns in activities:
            parent = stack[-1] if stack else model
            if name.endswith("_START") and len(name) > len("_START"):
                span = self._tracer.start_span(
                    name[: -len("_START")], set_span_in_context(parent), self._kind, start_time=ns
                )
                span.add_event(name, timestamp=ns)
                stack.append(span)
            elif name.endswith("_END") and len(name) > len("_END") and stack:
                span = stack.pop()
                span.add_event(name, timestamp=ns)
                span.end(end_time=ns)
            else:
                parent.add_event(name, timestamp=ns)
        for span in reversed(stack):
            span.end(end_time=end)

    def shutdown(self, timeout: float = 2.0) -> None:
        """Export what is queued, for at most ``timeout`` seconds: a collector that does not
        answer never holds the server's exit."""
        done = threading.Thread(target=self._provider.shutdown, name="otel-shutdown", daemon=True)
        done.start()
        done.join(timeout)
        if done.is_alive():
            log.warning("OpenTelemetry: spans not exported within %.0f s at shutdown were dropped", timeout)
