"""The classes of Triton's ``triton_python_backend_utils``, with the same names and behaviour."""

from __future__ import annotations

import enum
import inspect
import json
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from . import _runtime
from ._dlpack import KDLCUDA, capsule, capsule_device, import_bfloat16
from ._dtypes import NAMES, TRITONSERVER_TYPE_BF16, numpy_to_triton_type, triton_to_numpy_type

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
TRITONSERVER_MEMORY_CPU = 0
TRITONSERVER_MEMORY_CPU_PINNED = 1
TRITONSERVER_MEMORY_GPU = 2


# -- errors ---------------------------------------------------------------------------------


class TritonError(Exception):
    """An error a model puts in a response (``InferenceResponse(error=...)``)."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        super().__init__(message)
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, code={self._code})"


class TritonModelException(Exception):
    """Raised by ``pb_utils`` calls that fail (Triton's name)."""

    def message(self) -> str:
        return str(self)


# -- tensors -------------------------------------------------------------------------------


class _Capsule:
    """Lets numpy import a bare DLPack capsule (``Tensor.from_dlpack(name, capsule)``)."""

    def __init__(self, dl_capsule: Any) -> None:
        self._capsule = dl_capsule

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return capsule_device(self._capsule)


_new = object.__new__


class Tensor:
    """A named tensor on the CPU, backed by a numpy array."""

    __slots__ = ("_name", "_array", "_code")

    def __init__(self, name: str, data: Any, dtype: Any = None) -> None:
        # Triton's binding's checks: TypeError for a name that is not a str or no data,
        # then its own for an empty name.
        if type(name) is not str:
            _argument("Tensor", "name", name, str)
        if data is None:
            raise TypeError("Tensor(): incompatible function arguments: data must be a numpy array, not None")
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        array = data if isinstance(data, np.ndarray) else np.asarray(data)
        if dtype is not None and not isinstance(dtype, int):
            array = array.astype(dtype)
        code = dtype if isinstance(dtype, int) else numpy_to_triton_type(array.dtype)
        if code is None:
            raise TritonModelException(f"tensor '{name}': numpy dtype {array.dtype} has no Triton type")
        if array.dtype.kind in ("S", "U"):
            array = array.astype(np.object_)
        self._name = name
        self._array = array
        self._code = code

    @classmethod
    def _checked(cls, name: str, array: np.ndarray[Any, Any], code: int) -> Tensor:
        """A tensor of data the server already checked (a numpy array of the type ``code``
        names; BYTES as an object array), made without ``__init__``'s checks: the stub's
        and the in-process backend's received tensors, once per input per request."""
        tensor = _new(cls)
        tensor._name = name
        tensor._array = array
        tensor._code = code
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray[Any, Any]:
        if self._code == TRITONSERVER_TYPE_BF16:
            raise TritonModelException(
                "Tensor dtype is BF16 and cannot be converted to NumPy. "
                "Use to_dlpack() and from_dlpack() instead."
            )
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def triton_dtype(self) -> int:
        return self._code

    def triton_dtype_name(self) -> str:
        return NAMES.get(self._code, "INVALID")

    def is_cpu(self) -> bool:
        return True

    def memory_type(self) -> int:
        return TRITONSERVER_MEMORY_CPU

    def to_dlpack(self) -> Any:
        return self.__dlpack__()

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        array = self._array
        if array.dtype == np.object_:
            raise TritonModelException("DLPack does not support BYTES tensors")
        if self._code == TRITONSERVER_TYPE_BF16:  # numpy exports no bfloat16
            array = np.ascontiguousarray(array)
            return capsule(array.ctypes.data, array.shape, array.dtype, (1, 0), array, bfloat16=True)
        return array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    @staticmethod
    def from_dlpack(name: str, dlpack_tensor: Any) -> Tensor:
        """A tensor of DLPack data, no copy: host data as a numpy view, GPU data (a
        torch CUDA tensor) as a GPU tensor (``is_cpu()`` false)."""
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        source = dlpack_tensor if hasattr(dlpack_tensor, "__dlpack__") else _Capsule(dlpack_tensor)
        try:
            if isinstance(source, GpuTensor):  # another GPU tensor's memory, renamed
                return GpuTensor(name, source._device, source._code)
            if source.__dlpack_device__()[0] == KDLCUDA:
                return GpuTensor(name, source, _gpu_type(name, source))
            array = np.from_dlpack(source)
        except (RuntimeError, BufferError, TypeError, ValueError) as exc:
            bf16 = _bfloat16_from_dlpack(source)  # numpy imports no bfloat16
            if bf16 is not None:
                return Tensor._checked(name, bf16, TRITONSERVER_TYPE_BF16)
            raise TritonModelException(f"tensor '{name}': cannot import DLPack data: {exc}") from None
        return Tensor(name, array)

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, {self.triton_dtype_name()}, {self.shape()})"


def _bfloat16_from_dlpack(source: Any) -> np.ndarray[Any, Any] | None:
    """Host bfloat16 DLPack data as a numpy array, no copy; None for any other data."""
    try:
        return import_bfloat16(source.__dlpack__(), triton_to_numpy_type(TRITONSERVER_TYPE_BF16))
    except (RuntimeError, BufferError, TypeError, ValueError):
        return None


def _gpu_type(name: str, producer: Any) -> int:
    """The Triton type code of a DLPack producer's data (torch: its ``dtype``)."""
    dtype = getattr(producer, "dtype", None)
    text = str(dtype).removeprefix("torch.")
    code = numpy_to_triton_type(np.dtype(text)) if text in _NUMPY_NAMES else None
    if code is None:
        raise TypeError(f"data type {dtype} has no Triton type")
    return code


#: The DLPack-able dtypes by the names torch and numpy share.
_NUMPY_NAMES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    + ["float16", "float32", "float64"]
)


class GpuTensor(Tensor):
    """A tensor in GPU memory (Triton: ``is_cpu()`` false, memory type GPU): take
    it with DLPack (``torch.from_dlpack(tensor)``, ``tensor.to_dlpack()``);
    ``as_numpy()`` refuses, as in Triton. ``_device`` is what holds the memory:
    the server's device array, or the producer a model passed to ``from_dlpack``
    (a torch CUDA tensor)."""

    __slots__ = ("_device",)

    def __init__(self, name: str, device: Any, code: int) -> None:
        self._name = name
        self._device = device
        self._code = code

    def as_numpy(self) -> np.ndarray[Any, Any]:
        raise TritonModelException("Tensor is stored in GPU and cannot be converted to NumPy.")

    def shape(self) -> list[int]:
        return list(self._device.shape)

    def is_cpu(self) -> bool:
        return False

    def memory_type(self) -> int:
        return TRITONSERVER_MEMORY_GPU

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self._device.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        device_type, device_id = self._device.__dlpack_device__()
        return int(device_type), int(device_id)

    def to_host(self) -> np.ndarray[Any, Any]:
        """The tensor's data copied to host memory (what crosses a process boundary)."""
        device = self._device
        for method in ("to_host", "cpu"):  # the server's device array; a torch tensor
            copy = getattr(device, method, None)
            if copy is not None:
                result = copy()
                return np.asarray(result if method == "to_host" else result.numpy())
        return np.from_dlpack(device, device="cpu", copy=True)

    def __repr__(self) -> str:
        where = f"GPU {self._device.__dlpack_device__()[1]}"
        return f"Tensor({self._name!r}, {self.triton_dtype_name()}, {self.shape()}, {where})"


# -- requests --------------------------------------------------------------------------------


class PreferredMemory:
    """Where a BLS call would like its outputs (``TRITONSERVER_MEMORY_CPU``/``_GPU``, device).

    ``TRITONSERVER_MEMORY_GPU`` asks the model called for its outputs on that GPU: a model
    that produces them there (PyTorch, ONNX Runtime or TensorRT on that GPU) hands them
    over without a copy to the host, and they reach ``execute`` as GPU tensors.
    ``TRITONSERVER_MEMORY_CPU`` copies GPU outputs to host memory. Without it, outputs come
    where the model called put them (host memory from those three unless asked).
    """

    def __init__(self, preferred_memory_type: int, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class InferenceTrace:
    """A request's trace handle (``request.trace()``); pass it on to BLS requests
    (``InferenceRequest(..., trace=request.trace())``) to make them part of its trace."""

    def __init__(self, context: str | None = None) -> None:
        #: The W3C ``traceparent`` of the request's span; None when it is not traced.
        self._context = context

    def get_context(self) -> str | None:
        """The OpenTelemetry context as Triton gives it (JSON, ``{"traceparent": ...}``),
        None when the request is not traced (or traced to a file, which has no context)."""
        if not self._context or not self._context.startswith("00-"):
            return None
        return json.dumps({"traceparent": self._context})


_NO_TRACE = InferenceTrace()


#: Held while a request's response sender is made on first ask (rare, and short).
_MAKING_SENDER = threading.Lock()


class Flag(Protocol):
    """Where a request's cancellation is kept: a ``CancelFlag``, or (in-process) the
    server's own request."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


class CancelFlag:
    """Whether a request was cancelled: set once, from any thread (cheaper than an Event)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


#: The default of an argument that has none in Triton's binding (a TypeError if left out).
_REQUIRED: Any = object()


class InferenceRequest:
    """A request: one the model received in ``execute``, or a BLS request it builds.

    ``InferenceRequest(model_name=..., inputs=[...], requested_output_names=[...])``
    then ``exec()`` / ``await async_exec()`` runs it on any loaded model.
    """

    # What ``__init__`` sets these to, for ``_received``, which leaves them to the class.
    _trace: InferenceTrace | None = None
    _preferred_memory: PreferredMemory | None = None
    _sender: InferenceResponseSender | None = None
    _token: Any = None
    _release_flags = TRITONSERVER_REQUEST_RELEASE_ALL

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: list[Tensor] | tuple[Tensor, ...] = _REQUIRED,
        requested_output_names: list[str] | tuple[str, ...] = _REQUIRED,
        model_name: str | bytes = _REQUIRED,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory | None = None,
        trace: InferenceTrace | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        # Triton's order of arguments (all of them are usually given by name), and
        # its binding's checks: TypeError for an argument of the wrong type or missing
        # (``inputs``, ``requested_output_names`` and ``model_name`` have no default).
        # Bytes (NVIDIA's bls example passes ``model_name.as_numpy()[0]``, a
        # numpy bytes_) are UTF-8, as Triton's binding takes them.
        if isinstance(model_name, bytes):
            model_name = model_name.decode("utf-8")
        _request_arguments(
            request_id,
            correlation_id,
            inputs,
            requested_output_names,
            model_name,
            model_version,
            flags,
            timeout,
        )
        self._model_name = str(model_name)
        self._model_version = model_version
        self._inputs = list(inputs)
        self._requested = list(requested_output_names)
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._flags = flags
        self._timeout = timeout
        self._trace = trace
        self._preferred_memory = preferred_memory
        self._parameters: dict[str, Any] = _model_parameters(parameters)
        self._sender = None
        self._make_sender: Callable[[InferenceRequest], InferenceResponseSender | None] | None = None
        self._cancelled: Flag = CancelFlag()
        #: Set by the runtime for a request received in ``execute``: its wire token.
        self._token = None
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL

    @classmethod
    def _received(
        cls,
        model_name: str,
        model_version: int,
        inputs: list[Tensor],
        requested_output_names: list[str],
        request_id: str,
        correlation_id: int | str,
        flags: int,
        timeout: int,
        parameters: dict[str, Any],
        cancelled: Flag | None = None,
        make_sender: Callable[[InferenceRequest], InferenceResponseSender | None] | None = None,
    ) -> InferenceRequest:
        """The backend's constructor for a request ``execute`` receives, built from one
        the server validated: ``model_name`` is a ``str``, ``inputs`` and
        ``requested_output_names`` are new lists this request may own, ``parameters``
        a dict; what ``__init__`` does beyond that is done here the same way.

        ``cancelled``: where ``is_cancelled()`` looks (anything with ``is_set()``; a new
        ``CancelFlag`` by default). ``make_sender(request)``: makes the response sender
        when the model first asks for it (``get_response_sender``), None for none."""
        request = cls.__new__(cls)
        request._model_name = model_name
        request._model_version = model_version
        request._inputs = inputs
        request._requested = requested_output_names
        request._request_id = request_id
        request._correlation_id = correlation_id
        request._flags = flags
        request._timeout = timeout
        # _trace, _sender, _token, _release_flags: the class's (as __init__ sets them).
        request._parameters = dict(parameters) if parameters else {}
        request._make_sender = make_sender
        request._cancelled = CancelFlag() if cancelled is None else cancelled
        return request

    # the accessors Triton's class has
    def inputs(self) -> list[Tensor]:
        return self._inputs

    def requested_output_names(self) -> list[str]:
        return self._requested

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int) -> None:
        self._flags = int(flags)

    def trace(self) -> InferenceTrace:
        return self._trace if self._trace is not None else _NO_TRACE

    def timeout(self) -> int:
        """The request's timeout in microseconds (its ``timeout`` parameter; 0: none)."""
        return self._timeout

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def parameters(self) -> str:
        """The request's parameters as a JSON object string, compact as Triton gives
        them (``{"k":"v","n":5}``). Triton's reserved parameters are not among them:
        ``timeout`` is ``timeout()``, ``priority`` and the ``sequence_*`` ones the
        scheduler's."""
        return json.dumps(self._parameters, separators=(",", ":"))

    def get_response_sender(self) -> InferenceResponseSender:
        sender = self._sender
        if sender is None and self._make_sender is not None:
            with _MAKING_SENDER:  # one sender, however many threads ask first
                if self._sender is None:
                    self._sender = self._make_sender(self)
                sender = self._sender
        if sender is None:
            raise TritonModelException("only requests received by execute() have a response sender")
        return sender

    def is_cancelled(self) -> bool:
        return self._cancelled.is_set()

    def set_release_flags(self, flags: int) -> None:
        """``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``: run this request again once
        ``execute`` returns (give it ``None`` in the returned list; a decoupled model
        sends its responses so far first). Only sequence batching with
        ``iterative_sequence: true`` takes requests back; elsewhere it fails."""
        self._release_flags = int(flags)

    @property
    def _rescheduled(self) -> bool:
        return bool(self._release_flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)

    # BLS
    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on ``model_name``; a response (an iterator of them if ``decoupled``)."""
        self._check_bls()
        timeout = self._timeout / 1e6 if self._timeout else None
        return _runtime.current().bls(self, decoupled, timeout)

    async def async_exec(self, decoupled: bool = False) -> Any:
        """``exec`` for ``async def execute``: await it. Decoupled, it gives the
        ``ResponseIterator`` once the first response has arrived, as Triton's does (so a
        model may then iterate it with a plain ``for``), or iterate it with ``async for``."""
        self._check_bls()
        timeout = self._timeout / 1e6 if self._timeout else None
        return await _runtime.current().bls_async(self, decoupled, timeout)

    def _check_bls(self) -> None:
        # The constructor checked the inputs' types already.
        if not self._model_name:
            raise TritonModelException("BLS request has no model_name")


def _argument(function: str, name: str, value: Any, kind: type) -> None:
    """TypeError, as Triton's binding raises it, unless ``value`` is a ``kind``."""
    if not isinstance(value, kind):
        raise TypeError(
            f"{function}(): incompatible function arguments: {name} must be "
            f"{kind.__name__}, not {type(value).__name__}"
        )


def _request_arguments(
    request_id: Any,
    correlation_id: Any,
    inputs: Any,
    requested_output_names: Any,
    model_name: Any,
    model_version: Any,
    flags: Any,
    timeout: Any,
) -> None:
    """A BLS request's arguments checked as Triton's binding checks them: TypeError for
    a wrong type or a missing one; an input that is None is a TritonModelException."""
    for name, value in (
        ("inputs", inputs),
        ("requested_output_names", requested_output_names),
        ("model_name", model_name),
    ):
        if value is _REQUIRED:
            raise TypeError(f"InferenceRequest(): incompatible function arguments: {name} is required")
    _argument("InferenceRequest", "request_id", request_id, str)
    if not isinstance(correlation_id, (int, str)):
        _argument("InferenceRequest", "correlation_id", correlation_id, int)
    _argument("InferenceRequest", "model_name", model_name, str)
    for name, value in (("model_version", model_version), ("flags", flags), ("timeout", timeout)):
        _argument("InferenceRequest", name, value, int)
    if not isinstance(inputs, (list, tuple)):
        _argument("InferenceRequest", "inputs", inputs, list)
    for tensor in inputs:
        if not isinstance(tensor, Tensor):
            if tensor is None:
                raise TritonModelException("BLS request inputs must be pb_utils.Tensor objects, not None")
            _argument("InferenceRequest", "inputs", tensor, Tensor)
    if not isinstance(requested_output_names, (list, tuple)):
        _argument("InferenceRequest", "requested_output_names", requested_output_names, list)
    for output in requested_output_names:
        _argument("InferenceRequest", "requested_output_names", output, str)


def _model_parameters(parameters: Any) -> dict[str, Any]:
    """A copy of the ``parameters`` a model gives a request or a response, checked as
    Triton's binding checks them, in its words: None or a dict of ``str`` keys to
    ``bool``, ``int`` or ``str`` values."""
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise TritonModelException(f"Expect dict, got {type(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"Expect parameters keys to have type str, found type {type(key)}")
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(value)}"
            )
    return dict(parameters)


class InferenceResponse:
    """A response: output tensors, or an error."""

    def __init__(
        self,
        output_tensors: list[Tensor] | tuple[Tensor, ...] = (),
        error: TritonError | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        # Triton's binding's checks: a list of tensors (a None in it: TritonModelException),
        # else TypeError.
        if not isinstance(output_tensors, (list, tuple)):
            _argument("InferenceResponse", "output_tensors", output_tensors, list)
        self._outputs = list(output_tensors)
        for tensor in self._outputs:
            if not isinstance(tensor, Tensor):
                if tensor is None:
                    raise TritonModelException("output_tensors must hold pb_utils.Tensor objects, not None")
                _argument("InferenceResponse", "output_tensors", tensor, Tensor)
        if error is not None and not isinstance(error, TritonError):
            _argument("InferenceResponse", "error", error, TritonError)
        self._error = error
        self._parameters: dict[str, Any] = _model_parameters(parameters)

    @classmethod
    def _received(
        cls, outputs: list[Tensor], error: TritonError | None, parameters: dict[str, Any] | None
    ) -> InferenceResponse:
        """A BLS call's response, made without ``__init__``'s checks: its parameters are
        whatever the model called sent (a double, Triton's ``triton_final_response``)."""
        response = _new(cls)
        response._outputs = outputs
        response._error = error
        response._parameters = parameters or {}
        return response

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._parameters, separators=(",", ":"))


class InferenceResponseSender:
    """Sends a request's responses (decoupled models: any number, then FINAL; others:
    one response, with FINAL or followed by it). Misuse raises as in Triton, at once."""

    def __init__(self, send: Any, request: InferenceRequest, decoupled: bool | None = None) -> None:
        self._send = send
        # Only the request's cancellation flag: a reference to the request itself would
        # make a cycle (request -> sender -> request) that keeps its input tensors, and
        # the shared memory under them, alive until the cyclic GC happens to run.
        self._cancelled = request._cancelled
        self._decoupled = decoupled  # None: not known here, the server checks
        self._sent = 0
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException("send() takes a pb_utils.InferenceResponse")
        if response is None and not flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            raise TritonModelException("Response is None but the FINAL flag is not set")
        self._count(response, flags)
        self._send(response, flags)

    def _count(self, response: InferenceResponse | None, flags: int) -> None:
        """Account for a response about to go (or returned from ``execute``, which
        counts as sent with FINAL), refusing what Triton's sender refuses."""
        with self._lock:
            if self._decoupled is False:
                if response is not None and self._sent > 0:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send more than one response."
                    )
                if response is None and flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL and self._sent == 0:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send complete final "
                        "before sending a response."
                    )
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            if flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                self._closed = True
            self._sent += 1

    def is_cancelled(self) -> bool:
        return self._cancelled.is_set()


# -- logging ---------------------------------------------------------------------------------


class LogLevel(enum.Enum):
    """A log line's level (Triton's ``Logger.LogLevel``: an enum, not an int)."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


class Logger:
    """Messages into the server's log, filtered by its log settings (a message that is
    not a ``str``, or a level that is not a ``LogLevel``, is a TypeError, as in Triton)."""

    @staticmethod
    def _where() -> tuple[str, int]:
        """The caller's file and line, as Triton's log lines carry them (``model.py:12``); a file in
        a version folder is named with its model and version (``simple/1/model.py``), which
        Triton's line lacks and a log of many models needs."""
        frame = inspect.currentframe()
        caller = frame.f_back.f_back if frame and frame.f_back else None
        if caller is None:
            return "model.py", 0
        parts = caller.f_code.co_filename.replace("\\", "/").rsplit("/", 3)
        if len(parts) == 4 and parts[2].isdigit():  # <repository>/<model>/<version>/<file>
            return "/".join(parts[1:]), caller.f_lineno
        return parts[-1], caller.f_lineno

    @staticmethod
    def log(message: str, level: LogLevel = LogLevel.INFO) -> None:
        _argument("log", "message", message, str)
        _argument("log", "level", level, LogLevel)
        _runtime.current().log(level.name, message, *Logger._where())

    @staticmethod
    def log_info(message: str) -> None:
        _argument("log_info", "message", message, str)
        _runtime.current().log("INFO", message, *Logger._where())

    @staticmethod
    def log_warn(message: str) -> None:
        _argument("log_warn", "message", message, str)
        _runtime.current().log("WARNING", message, *Logger._where())

    @staticmethod
    def log_error(message: str) -> None:
        _argument("log_error", "message", message, str)
        _runtime.current().log("ERROR", message, *Logger._where())

    @staticmethod
    def log_verbose(message: str) -> None:
        _argument("log_verbose", "message", message, str)
        _runtime.current().log("VERBOSE", message, *Logger._where())


# As in Triton: ``logger.log("...", logger.INFO)`` and ``Logger.LogLevel``.
Logger.LogLevel = LogLevel  # type: ignore[attr-defined]
for _name in ("INFO", "WARNING", "ERROR", "VERBOSE"):
    setattr(Logger, _name, getattr(LogLevel, _name))


# -- metrics ---------------------------------------------------------------------------------


class MetricKind:
    """The kinds of ``MetricFamily`` (also reachable as ``MetricFamily.COUNTER`` etc.)."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class MetricFamily:
    """A custom metric family exported on the server's metrics port."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: str) -> None:
        if kind not in (self.COUNTER, self.GAUGE, self.HISTOGRAM):
            raise TritonModelException(f"unknown metric kind '{kind}'")
        self.name = name
        self.kind = kind
        self._handle = _runtime.current().metric_family(name, description, kind)

    def Metric(self, labels: dict[str, str] | None = None, buckets: list[float] | None = None) -> Metric:  # noqa: N802
        return Metric(self, labels or {}, buckets)


class Metric:
    """One label set of a ``MetricFamily``. As in Triton it does not keep its family
    alive: once the model drops the family, using the metric is an error."""

    def __init__(self, family: MetricFamily, labels: dict[str, str], buckets: list[float] | None) -> None:
        self._family = weakref.ref(family)
        self._handle = _runtime.current().metric(family._handle, dict(labels), buckets)

    def _live(self) -> Any:
        if self._family() is None:
            raise TritonModelException(
                "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."
            )
        return self._handle

    def increment(self, value: float) -> None:
        _runtime.current().metric_update(self._live(), "increment", float(value))

    def set(self, value: float) -> None:
        _runtime.current().metric_update(self._live(), "set", float(value))

    def observe(self, value: float) -> None:
        _runtime.current().metric_update(self._live(), "observe", float(value))

    def value(self) -> float:
        return _runtime.current().metric_value(self._live())


# -- model control (BLS) ----------------------------------------------------------------------


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    _runtime.current().model_control("load", model_name, -1, config, dict(files or {}))


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    _runtime.current().model_control("unload", model_name, -1, "", {})


def is_model_ready(model_name: str, model_version: str | int = "") -> bool:
    version = int(model_version) if str(model_version).strip() else -1
    return bool(_runtime.current().model_control("ready", model_name, version, "", {}))


# -- auto-complete ----------------------------------------------------------------------------


class ModelConfig:
    """The config handed to ``auto_complete_config``; changes are returned to the server.

    Its rules and messages are those of Triton's ``pb_utils.ModelConfig``: a tensor
    is given by ``name``, ``data_type`` and ``dims`` (an input also ``optional``),
    nothing else; one the config already has must agree with it where the config
    says something (a ``data_type`` other than ``TYPE_INVALID``, non-empty ``dims``),
    and is completed from it.
    """

    def __init__(self, model_config: dict[str, Any] | str) -> None:
        self._config = json.loads(model_config) if isinstance(model_config, str) else model_config

    def as_dict(self) -> dict[str, Any]:
        return self._config

    def max_batch_size(self) -> int:
        return int(self._config.get("max_batch_size", 0))

    def _name(self) -> str:
        return str(self._config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        """Set ``max_batch_size``; a config that gives a larger one keeps it and fails."""
        current = int(self._config.get("max_batch_size", 0))
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but in auto-complete-config "
                f"function for model '{self._name()}' specified max_batch_size {max_batch_size}"
            )
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        """Schedule the model with the dynamic batcher, unless the config chose another."""
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{other}', but auto-complete-config "
                    f"function for model '{self._name()}' tries to set scheduling_choice as "
                    "'dynamic_batching'"
                )
        self._config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict[str, Any]) -> None:  # noqa: A002 (Triton's name)
        self._add("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output: dict[str, Any]) -> None:
        self._add("output", output, ("name", "data_type", "dims"))

    def _add(self, kind: str, tensor: dict[str, Any], allowed: tuple[str, ...]) -> None:
        model = self._name()
        if any(key not in allowed for key in tensor):
            listed = ", ".join(f"'{key}'" for key in allowed[:-1]) + f" and '{allowed[-1]}'"
            raise ValueError(
                f"{kind} '{tensor.get('name', '')}' in auto-complete-config function for model "
                f"'{model}' contains property other than {listed}."
            )
        if "name" not in tensor:
            raise ValueError(
                f"{kind} in auto-complete-config function for model '{model}' is missing 'name' property."
            )
        for key in ("data_type", "dims"):
            if key not in tensor:
                raise ValueError(
                    f"{kind} '{tensor['name']}' in auto-complete-config function for model '{model}' "
                    f"is missing '{key}' property."
                )
        name = tensor["name"]
        for existing in self._config.setdefault(kind, []):
            if existing.get("name") != name:
                continue
            given = existing.get("data_type", "TYPE_INVALID")
            if given != "TYPE_INVALID" and given != tensor["data_type"]:
                raise ValueError(
                    f"unable to load model '{model}', configuration expects datatype {given} for "
                    f"{kind} '{name}', model provides {tensor['data_type']}"
                )
            dims = _dims(existing.get("dims") or [])
            if dims and dims != _dims(tensor["dims"]):
                raise ValueError(
                    f"model '{model}', tensor '{name}': the model expects dims {_dims(tensor['dims'])} "
                    f"but the model configuration specifies dims {dims}"
                )
            if "optional" in existing and "optional" in tensor and existing["optional"] != tensor["optional"]:
                raise ValueError(
                    f"model '{model}', tensor '{name}': the model expects optional {tensor['optional']} "
                    f"but the model configuration specifies optional {existing['optional']}"
                )
            existing["data_type"] = tensor["data_type"]
            existing["dims"] = _dims(tensor["dims"])
            if "optional" in tensor:
                existing["optional"] = tensor["optional"]
            return
        self._config[kind].append({**tensor, "dims": _dims(tensor["dims"])})

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        """Set ``model_transaction_policy`` (``decoupled``); a config that says otherwise fails."""
        if any(key != "decoupled" for key in transaction_policy_dict):
            raise ValueError(
                "model transaction property in auto-complete-config function for model "
                f"'{self._name()}' contains property other than 'decoupled'."
            )
        policy = self._config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(
                    "trying to change decoupled property in auto-complete-config for model "
                    f"'{self._name()}', which is already set to '{policy['decoupled']}'."
                )
            policy["decoupled"] = wanted


def _dims(dims: Any) -> list[int]:
    return [int(d) for d in dims]


# -- helpers --------------------------------------------------------------------------------


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    for entry in model_config.get("input", []):
        if entry.get("name") == name:
            return dict(entry)
    return None


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    for entry in model_config.get("output", []):
        if entry.get("name") == name:
            return dict(entry)
    return None


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))
