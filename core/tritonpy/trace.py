"""Triton's trace extension: settings, sampling, and Triton-style trace files.

Settings are global with per-model overrides: ``trace_level`` (OFF,
TIMESTAMPS, TENSORS: Triton's tensor records, ``tensor_record``),
``trace_rate`` (trace one request in N), ``trace_count`` (stop after N
traces; -1 = no limit), ``log_frequency`` (write the file every N traces, to
``<trace_file>.<k>``; 0 = at shutdown), ``trace_file`` (set at start only) and
``trace_mode`` (``triton``, or ``opentelemetry``: spans exported over OTLP/HTTP
by ``otel.py``; set at start only). Values travel as strings, as Triton sends
them.

With TIMESTAMPS the core stamps each traced request at REQUEST_START,
QUEUE_START, COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START,
COMPUTE_END, INFER_RESPONSE_COMPLETE and REQUEST_END (nanoseconds of a monotonic
clock), the HTTP and gRPC front ends their receive and send (``FrontEnd``), a
backend its own activities (``InferenceRequest.report_activity``), and the file is
Triton's: a JSON array with, per trace, ``{"id", "model_name", "model_version"}``
(``request_id``, ``parent_id`` when set) and an ``{"id", "timestamps": [{"name",
"ns"}]}`` per stamp (``_entries``). Each setting (global, or a model's own) keeps its
traces apart and writes them as Triton's ``TraceSetting`` does: every
``log_frequency`` traces, when its ``trace_count`` ran out, or at shutdown.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonpy_sdk import DataType, Tensor, TritonError

from .otel import OtelConfig, OtelExporter, Spans

log = logging.getLogger(__name__)

LEVELS = ("OFF", "TIMESTAMPS", "TENSORS")
#: The other words Triton's command line takes for a level (``ParseTraceLevelOption``):
#: MIN and MAX are what older releases called TIMESTAMPS; ON/TRUE and FALSE too.
_LEVEL_ALIASES = {
    "FALSE": "OFF",
    "TRUE": "TIMESTAMPS",
    "ON": "TIMESTAMPS",
    "MIN": "TIMESTAMPS",
    "MAX": "TIMESTAMPS",
}
MODES = ("triton", "opentelemetry")
_KEYS = ("trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file", "trace_mode")


@dataclass
class TraceState:
    trace_level: list[str] = field(default_factory=lambda: ["OFF"])
    trace_rate: int = 1000
    trace_count: int = -1
    log_frequency: int = 0
    trace_file: str = ""
    trace_mode: str = "triton"

    def as_strings(self) -> dict[str, Any]:
        return {
            "trace_level": list(self.trace_level),
            "trace_rate": str(self.trace_rate),
            "trace_count": str(self.trace_count),
            "log_frequency": str(self.log_frequency),
            "trace_file": self.trace_file,
            "trace_mode": self.trace_mode,
        }


@dataclass(slots=True, eq=False)
class Trace:
    """Timestamps of one traced request."""

    id: int
    model_name: str
    request_id: str
    stamps: list[tuple[str, int]] = field(default_factory=list)
    model_version: int = 0
    #: The open OpenTelemetry spans (mode ``opentelemetry``), else None.
    spans: Spans | None = None
    #: The trace id of the request that made this one (an ensemble step, BLS), else 0.
    parent_id: int = 0
    #: Who still adds stamps: the core until the request's end, and a front end (``FrontEnd``)
    #: until its answer is sent; ``Tracer.release`` writes the trace when the last is done.
    holds: int = 1
    #: The traces it was counted among (sampled while a ``trace_count`` was running down).
    batch: _Batch | None = None
    #: Whether its level takes timestamps (TENSORS alone takes none, as in Triton's).
    timestamps: bool = True
    #: Level TENSORS: Triton's tensor records, each with the number of stamps taken
    #: before it (``_entries`` puts it there); None without the level.
    tensors: list[tuple[int, dict[str, Any]]] | None = None

    def context(self) -> str:
        """What a request made by this one carries to join its trace: a W3C
        ``traceparent`` (OpenTelemetry), else Triton's ``trace id`` as a string."""
        return self.spans.context() if self.spans is not None else str(self.id)

    def stamp(self, name: str, ns: int) -> None:
        if self.timestamps:
            self.stamps.append((name, ns))

    def record_tensors(self, activity: str, tensors: Iterable[Tensor]) -> None:
        """Level TENSORS: ``tensors`` as Triton's tracer writes them for ``activity``
        (TENSOR_QUEUE_INPUT, TENSOR_BACKEND_OUTPUT); nothing without the level."""
        records = self.tensors
        if records is None:
            return
        at = len(self.stamps)
        for tensor in tensors:
            try:
                records.append((at, tensor_record(self.id, activity, tensor)))
            except Exception as exc:  # never fail a request for its trace
                log.error("%s: tensor: %s: cannot be traced: %s", activity, tensor.name, exc)


#: A front end's stamps, as Triton's front ends name them: received from, received by,
#: sending from, sent by.
_FRONT_NAMES = {
    "HTTP": ("HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END"),
    "GRPC": ("GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"),
}
#: Every front-end stamp (OpenTelemetry puts them on ``InferRequest``).
FRONT_STAMPS = frozenset(name for names in _FRONT_NAMES.values() for name in names) | {
    "INFER_RESPONSE_COMPLETE"
}


class FrontEnd:
    """A front end's part of one request's trace, made (``Tracer.front``) when the request
    began to arrive while tracing was on: its receive stamps go into the request's trace
    if the core traces it (``Server.start_infer(front=...)``), and the front end stamps
    the sending of its answer, then ``sent()`` (or ``dropped()``, when nothing is sent)
    lets the trace be written. Unsampled requests make it a no-op."""

    __slots__ = ("_names", "stamps", "trace", "_tracer")

    def __init__(self, tracer: Tracer, protocol: str) -> None:
        self._names = _FRONT_NAMES[protocol]
        self._tracer = tracer
        self.stamps = [(self._names[0], time.monotonic_ns())]
        #: The request's trace once the core sampled it (it then holds it for this front end).
        self.trace: Trace | None = None

    def received(self) -> None:
        """The whole request arrived."""
        self.stamps.append((self._names[1], time.monotonic_ns()))

    def sending(self) -> None:
        if self.trace is not None:
            self.trace.stamp(self._names[2], time.monotonic_ns())

    def sent(self, last: bool = True) -> None:
        """The answer (a stream: one of its answers) was handed to the transport: stamped,
        and after the ``last`` one the trace let go."""
        trace = self.trace
        if trace is not None:
            trace.stamp(self._names[3], time.monotonic_ns())
            if last:
                self.trace = None
                self._tracer.release(trace)

    def dropped(self) -> None:
        """Nothing will be sent (the client went away): the trace let go unstamped."""
        trace = self.trace
        if trace is not None:
            self.trace = None
            self._tracer.release(trace)


def no_front() -> None:
    """``Tracer.front`` where there is no tracer (a front-end worker's requests)."""
    return None


#: The largest number a numeric trace setting takes: Triton 2.51 reads them into an
#: ``int`` (its message names the range of the field it stores them in).
_INT_MAX = 2**31 - 1


def _int(key: str, value: Any, minimum: int) -> int:
    """A numeric trace setting (``trace_rate``, ``trace_count``, ``log_frequency``), in
    Triton's words where it has some."""
    if isinstance(value, bool):
        raise TritonError.invalid_arg(f"Unable to parse '{key}', got: {value}")
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise TritonError.invalid_arg(f"Unable to parse '{key}', got: {value}") from None
    if number > _INT_MAX:
        limits = "[ -1, 2147483647 ]" if key == "trace_count" else "[ 0, 4294967295 ]"
        raise TritonError.invalid_arg(
            f"Unable to parse '{key}', value is out of range {limits}, got: {value}"
        )
    if key == "trace_count" and number < -1:
        raise TritonError.invalid_arg(f"Unable to parse 'trace_count'. Expecting value >= -1, got:{value}")
    if number < minimum:  # a rate of 0 or a negative number (Triton wraps those around)
        raise TritonError.invalid_arg(f"'{key}' must be >= {minimum}, got {number}")
    return number


def state_from_flags(items: list[str]) -> TraceState:
    """The settings of ``--trace-config`` values (see ``parse_flags``)."""
    return parse_flags(items)[0]


def parse_flags(items: list[str]) -> tuple[TraceState, OtelConfig]:
    """``--trace-config`` values: ``level=TIMESTAMPS``, ``rate=N``, ``count=N``,
    ``log-frequency=N``, ``mode=triton|opentelemetry``, ``triton,file=PATH`` (or
    ``file=PATH``), ``opentelemetry,url=URL``, ``opentelemetry,resource=KEY=VALUE``,
    ``opentelemetry,bsp_max_queue_size=N`` (and ``bsp_schedule_delay``,
    ``bsp_max_export_batch_size``)."""
    state = TraceState()
    otel = OtelConfig()
    for item in items:
        scope, setting = "", item
        for prefix in ("triton,", "opentelemetry,"):
            if item.startswith(prefix):
                scope, setting = prefix[:-1], item[len(prefix) :]
        key, sep, value = setting.partition("=")
        if not sep or not key or "," in key:
            raise ValueError(f"--trace-config expects [triton,|opentelemetry,]key=value, got '{item}'")
        key = key.strip().replace("-", "_") if scope != "opentelemetry" else key.strip()
        try:
            if scope == "opentelemetry":
                otel.set(key, value)
            elif key == "level":
                words = [v.strip().upper() for v in value.split(",") if v.strip()] or ["OFF"]
                levels = [_LEVEL_ALIASES.get(v, v) for v in words]
                bad = [v for v in levels if v not in LEVELS]
                if bad:
                    raise ValueError(f"invalid trace level '{bad[0]}'")
                # As Triton's command line: each level given is added to the others (OFF adds none).
                given = [v for v in state.trace_level if v != "OFF"]
                given += [v for v in levels if v != "OFF" and v not in given]
                state.trace_level = given or ["OFF"]
            elif key == "rate":
                # 0: no request is sampled; with OpenTelemetry, only those that carry a
                # traceparent are traced (as Triton's rate=0).
                state.trace_rate = max(0, int(value))
            elif key == "count":
                state.trace_count = int(value)
            elif key == "log_frequency":
                state.log_frequency = int(value)
            elif key == "file":
                state.trace_file = value
            elif key == "mode":
                if value not in MODES:
                    raise ValueError(
                        f"trace mode '{value}' is not supported; use 'triton' or 'opentelemetry'"
                    )
                state.trace_mode = value
            else:
                raise ValueError(f"unknown trace setting '{key}'")
        except ValueError as exc:
            raise ValueError(f"--trace-config {item}: {exc}") from None
    try:
        otel.check()
    except ValueError as exc:
        raise ValueError(f"--trace-config: {exc}") from None
    return state, otel


class _Batch:
    """The traces one ``trace_count`` lets through, as Triton's ``TraceSetting`` collects
    them: once the count has run down to 0 and the last of them is finished, they are
    written to an indexed file of their own (``<trace_file>.<k>``) at once; when the count
    is set again before that, or at shutdown, they join the other traces."""

    __slots__ = ("traces", "pending", "exhausted", "current")

    def __init__(self) -> None:
        self.traces: list[Trace] = []
        self.pending = 0
        self.exhausted = False
        #: Whether it is still its setting's batch (set again: no longer).
        self.current = True


class Tracer:
    """Trace settings and the traces of one server."""

    def __init__(self, state: TraceState | None = None, otel: OtelConfig | None = None) -> None:
        """Raises ``RuntimeError`` (with the install line) when the mode is ``opentelemetry``
        and the OpenTelemetry SDK is not installed."""
        self.global_state = state or TraceState()
        #: What a cleared (null) global setting goes back to: the server's start-up value, as
        #: in Triton (observed on 2.51), not the built-in default.
        self._startup = dataclasses.replace(
            self.global_state, trace_level=list(self.global_state.trace_level)
        )
        #: Whether level TENSORS was refused in OpenTelemetry mode (logged once).
        self._tensors_refused = False
        self._exporter = (
            OtelExporter(otel or OtelConfig()) if self.global_state.trace_mode == "opentelemetry" else None
        )
        self._models: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        #: The running batch of each count-limited setting: "" global, else a model's override.
        self._batches: dict[str, _Batch] = {}
        self._ids = itertools.count(1)
        #: Finished traces not yet written, by the setting they were taken under ("" global, else
        #: a model with settings of its own), as Triton's settings each keep theirs.
        self._streams: dict[str, list[Trace]] = {}
        self._file_index = 0
        #: Trace ids of open OpenTelemetry traces by their context (a child's parent_id).
        self._open: dict[str, int] = {}
        #: Whether no request can be traced (level OFF, no model overrides): the request
        #: path reads it instead of calling ``sample``; ``update`` keeps it.
        self.off = self._all_off()

    def _all_off(self) -> bool:
        return not self._models and self.global_state.trace_level == ["OFF"]

    # -- settings ------------------------------------------------------------------------

    def _effective(self, model: str) -> TraceState:
        state = TraceState(**vars(self.global_state))
        for key, value in self._models.get(model, {}).items():
            setattr(state, key, value)
        return state

    def settings(self, model: str = "") -> dict[str, Any]:
        with self._lock:
            return self._effective(model).as_strings()

    def update(self, changes: dict[str, Any], model: str = "") -> dict[str, Any]:
        """Apply ``changes`` (a null value clears a model's override); all or nothing."""
        parsed: dict[str, Any] = {}
        cleared: list[str] = []
        for key, value in changes.items():
            if key not in _KEYS:
                raise TritonError.invalid_arg(f"unknown trace setting '{key}'")
            if value is None or value == []:
                cleared.append(key)
                continue
            if key == "trace_file":
                raise TritonError.unsupported(
                    "trace file location can not be updated through network protocol"
                )
            if key == "trace_level":
                levels = [value] if isinstance(value, str) else value
                if not isinstance(levels, list):
                    raise TritonError.invalid_arg(
                        f"invalid trace level {value!r}; use OFF, TIMESTAMPS or TENSORS"
                    )
                bad = [v for v in levels if not isinstance(v, str) or v not in LEVELS]
                if bad:
                    raise TritonError.invalid_arg(
                        f"invalid trace level {bad[0]!r}; use OFF, TIMESTAMPS or TENSORS"
                    )
                parsed[key] = levels
            elif key == "trace_mode":
                if value != self.global_state.trace_mode:
                    raise TritonError.unsupported(
                        f"trace mode '{value}' cannot be set while serving; "
                        f"the mode is '{self.global_state.trace_mode}' (--trace-config mode=...)"
                    )
                parsed[key] = value
            else:
                first = value[0] if isinstance(value, list) and value else value
                parsed[key] = _int(
                    key, first, -1 if key == "trace_count" else (1 if key == "trace_rate" else 0)
                )
        with self._lock:
            levels = parsed.get("trace_level")
            if (
                levels is not None
                and any(v != "OFF" for v in levels)
                and self._exporter is None
                and not self.global_state.trace_file
            ):
                # Triton's check and words: traces need a file, and a file is set at start only.
                raise TritonError.invalid_arg(
                    "Attempting to set invalid trace setting :trace file name is not given"
                )
            if model:
                overrides = self._models.setdefault(model, {})
                for key in cleared:
                    overrides.pop(key, None)
                overrides.update(parsed)
            else:
                for key in cleared:
                    value = getattr(self._startup, key)
                    setattr(self.global_state, key, list(value) if isinstance(value, list) else value)
                for key, value in parsed.items():
                    setattr(self.global_state, key, value)
            if "trace_count" in parsed or "trace_count" in cleared:
                self._retire_batch(model)  # the count starts again, with traces of its own
            self.off = self._all_off()
            return self._effective(model).as_strings()

    # -- tracing (hot path) ---------------------------------------------------------------

    def sample(
        self,
        model: str,
        request_id: str,
        parent: str = "",
        internal: bool = False,
        front: FrontEnd | None = None,
    ) -> Trace | None:
        """A trace for this request when tracing is on and its turn has come.

        ``parent``: the context the request carries (a W3C ``traceparent`` from a
        client, or the ``Trace.context()`` of the request that made it); ``internal``:
        a request made by another one (an ensemble step, BLS). With OpenTelemetry a
        request with a context is always traced, whatever the rate and count (as in
        Triton), and an internal request only with one, as a child of its maker's span.
        ``front``: the stamps of the front end that received the request; a trace taken
        starts with them (its OpenTelemetry ``InferRequest`` span where they start) and is
        held for the front end until it sent its answer (``FrontEnd.sent``).
        """
        if self.off:
            return None  # the common case: one read, no lock
        exporter = self._exporter
        with self._lock:
            state = self._effective(model)
            if "TIMESTAMPS" not in state.trace_level and "TENSORS" not in state.trace_level:
                return None
            if exporter is None or not parent:
                if exporter is not None and internal:
                    return None  # its maker is not traced: no orphan spans
                if state.trace_count == 0:
                    return None  # the count ran out (Triton's setting is then invalid)
                seen = self._seen.get(model, 0) + 1
                self._seen[model] = seen
                if state.trace_rate == 0 or seen % state.trace_rate != 0:
                    return None
            trace = Trace(next(self._ids), model, request_id)
            if state.trace_count > 0 and (exporter is None or not parent):
                trace.batch = self._count_down(model)
        trace.timestamps = "TIMESTAMPS" in state.trace_level
        if "TENSORS" in state.trace_level:
            if exporter is None:
                trace.tensors = []
            elif not self._tensors_refused:  # Triton logs it for every tensor
                self._tensors_refused = True
                log.error("Tensor level tracing is not supported by the mode: opentelemetry")
        if front is not None:
            if trace.timestamps:
                trace.stamps.extend(front.stamps)
            trace.holds = 2
            front.trace = trace
        if exporter is not None:
            since = None if front is None else front.stamps[0][1]
            trace.spans = exporter.start(model, parent, internal, since)
            with self._lock:
                if internal:
                    trace.parent_id = self._open.get(parent, 0)
                self._open[trace.context()] = trace.id
        elif internal and parent.isdigit():
            trace.parent_id = int(parent)
        return trace

    def front(self, protocol: str) -> FrontEnd | None:
        """A front end's stamps for a request that begins to arrive now (``protocol``:
        "HTTP" or "GRPC"); None while no request can be traced."""
        return None if self.off else FrontEnd(self, protocol)

    def release(self, trace: Trace) -> None:
        """One holder of ``trace`` is done with it; the last one writes it (``finish``)."""
        with self._lock:
            trace.holds -= 1
            if trace.holds:
                return
        self.finish(trace)

    def finish(self, trace: Trace) -> None:
        if trace.spans is not None and self._exporter is not None:
            with self._lock:
                self._open.pop(trace.context(), None)
            self._exporter.finish(
                trace.spans,
                trace.stamps,
                {
                    "triton.model_name": trace.model_name,
                    "triton.model_version": trace.model_version,
                    "triton.trace_id": trace.id,
                    "triton.trace_parent_id": trace.parent_id,
                    "triton.request_id": trace.request_id,
                },
            )
            return
        with self._lock:
            batch = trace.batch
            if batch is not None and batch.current:
                batch.traces.append(trace)
                batch.pending -= 1
                if batch.exhausted and not batch.pending:
                    batch.current = False
                    self._write_locked(batch.traces, numbered=True)
                return
            key = trace.model_name if self._models.get(trace.model_name) else ""
            stream = self._streams.setdefault(key, [])
            stream.append(trace)
            frequency = self._effective(trace.model_name).log_frequency
            if frequency > 0 and len(stream) >= frequency:
                self._write_locked(self._streams.pop(key), numbered=True)

    def _count_down(self, model: str) -> _Batch:
        """Take one off the running count that applies to ``model`` (its own override, else the
        global one; ``trace_count`` then shows what is left, as Triton's does) and return the
        batch the trace belongs to. With the lock held."""
        overrides = self._models.get(model, {})
        if "trace_count" in overrides:
            key, left = model, overrides["trace_count"] - 1
            overrides["trace_count"] = left
        else:
            key, left = "", self.global_state.trace_count - 1
            self.global_state.trace_count = left
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = _Batch()
        batch.pending += 1
        if left == 0:
            batch.exhausted = True
            del self._batches[key]
        return batch

    def _retire_batch(self, key: str) -> None:
        """The count of ``key`` ("" global) was set again: what its running batch collected
        joins the other traces, and so do those of it still in flight. With the lock held."""
        batch = self._batches.pop(key, None)
        if batch is not None:
            batch.current = False
            self._streams.setdefault(key, []).extend(batch.traces)
            batch.traces = []

    def flush(self) -> None:
        """Write what is left (at shutdown); OpenTelemetry: export what is queued, for a
        bounded time."""
        if self._exporter is not None:
            self._exporter.shutdown()
        with self._lock:
            for key in list(self._batches):
                self._retire_batch(key)
            # What is left of a setting with a log frequency goes to an indexed file of its own,
            # the rest to the main file, as Triton's settings save theirs when they end.
            streams, self._streams = self._streams, {}
            main: list[Trace] = []
            for key, traces in streams.items():
                if traces and self._effective(key).log_frequency > 0:
                    self._write_locked(traces, numbered=True)
                else:
                    main += traces
            if main:
                self._write_locked(main, numbered=False)

    def _write_locked(self, records: list[Trace], numbered: bool) -> None:
        path = self.global_state.trace_file
        if not path:
            log.warning(
                "dropping %d trace(s): no trace file set (--trace-config triton,file=...)", len(records)
            )
            return
        target = Path(f"{path}.{self._file_index}" if numbered else path)
        if numbered:
            self._file_index += 1
        entries = [entry for trace in records for entry in _entries(trace)]
        try:
            target.write_text(json.dumps(entries, separators=(",", ":")))
        except OSError as exc:
            log.error("cannot write trace file %s: %s", target, exc)


def _entries(trace: Trace) -> list[dict[str, Any]]:
    """``trace`` as Triton's trace file has it: an object per stamp, ``{"id", "timestamps":
    [{"name", "ns"}]}``, in the order they were taken, and before REQUEST_START the trace's
    own, ``{"id", "model_name", "model_version"}`` with ``request_id`` and ``parent_id``
    when it has them (NVIDIA's tools merge the objects of an id)."""
    header: dict[str, Any] = {
        "id": trace.id,
        "model_name": trace.model_name,
        "model_version": trace.model_version,
    }
    if trace.request_id:
        header["request_id"] = trace.request_id
    if trace.parent_id:
        header["parent_id"] = trace.parent_id
    at = next((i for i, (name, _) in enumerate(trace.stamps) if name == "REQUEST_START"), None)
    tensors = trace.tensors or []
    entries: list[dict[str, Any]] = []
    t = 0
    for i, (name, ns) in enumerate(trace.stamps):
        while t < len(tensors) and tensors[t][0] <= i:  # a tensor after the stamps before it
            entries.append(tensors[t][1])
            t += 1
        if i == at:
            entries.append(header)
        entries.append({"id": trace.id, "timestamps": [{"name": name, "ns": ns}]})
    entries += [record for _, record in tensors[t:]]
    if at is None and trace.timestamps:
        entries.insert(0, header)
    return entries  # level TENSORS alone: no header, as in Triton


def tensor_record(trace_id: int, activity: str, tensor: Tensor) -> dict[str, Any]:
    """One tensor as Triton's trace file has it: ``{"id", "activity", "tensor": {"name",
    "data", "shape", "dtype"}}``, the data and shape as comma-separated text (numbers as
    C++ streams them, ``%g`` for floats; strings quoted; FP16 and BF16 left empty, as
    Triton leaves them). INT8/UINT8 are numbers (Triton streams them as characters)."""
    if tensor.is_device:
        tensor = tensor.to_host()
    data = tensor.data
    dtype = tensor.datatype
    if dtype in (DataType.FP16, DataType.BF16):
        text = ""
    elif dtype is DataType.BYTES:
        text = ",".join(
            '"' + (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)) + '"'
            for v in data.reshape(-1)
        )
    elif dtype is DataType.BOOL:
        text = ",".join("1" if v else "0" for v in data.reshape(-1).tolist())
    elif dtype in (DataType.FP32, DataType.FP64):
        text = ",".join(format(v, "g") for v in data.reshape(-1).tolist())
    else:
        text = ",".join(map(str, data.reshape(-1).tolist()))
    shape = ",".join(map(str, data.shape))
    return {
        "id": trace_id,
        "activity": activity,
        "tensor": {"name": tensor.name, "data": text, "shape": shape, "dtype": dtype.value},
    }
