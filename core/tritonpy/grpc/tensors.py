"""ModelInferRequest / ModelInferResponse to and from the core's types.

Inputs come from ``raw_input_contents`` (a numpy view of the message's bytes),
from typed ``contents``, or from a system shared-memory region their parameters
name; outputs go out as ``raw_output_contents``, as Triton sends them, or into
the region a requested output's parameters name (then its raw contents are
empty, as Triton's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    RequestedOutput,
    Tensor,
    TritonError,
)

from ..codec import (
    ByteSizeMismatch,
    InputSizes,
    StringsMismatch,
    already_exists,
    array_from_buffer,
    array_to_buffer,
    element_count,
    stand_in,
)
from ..memory.shared import REGION, SHARED_MEMORY_KEYS, OutputSlot, SystemSharedMemory
from ..model_version import parse_version
from . import grpc_service_pb2 as pb

#: The typed ``contents`` field of each data type (FP16 and BF16 have none: raw only).
CONTENTS_FIELD = {
    DataType.BOOL: "bool_contents",
    DataType.INT8: "int_contents",
    DataType.INT16: "int_contents",
    DataType.INT32: "int_contents",
    DataType.INT64: "int64_contents",
    DataType.UINT8: "uint_contents",
    DataType.UINT16: "uint_contents",
    DataType.UINT32: "uint_contents",
    DataType.UINT64: "uint64_contents",
    DataType.FP32: "fp32_contents",
    DataType.FP64: "fp64_contents",
    DataType.BYTES: "bytes_contents",
}


def parameters_from_proto(params: Mapping[str, pb.InferParameter]) -> dict[str, ParameterValue]:
    out: dict[str, ParameterValue] = {}
    for key, param in params.items():
        which = param.WhichOneof("parameter_choice")
        if which is not None:
            out[key] = getattr(param, which)
    return out


def parameters_to_proto(values: Mapping[str, ParameterValue], target: Any) -> None:
    for key, value in values.items():
        param = target[key]
        if isinstance(value, bool):
            param.bool_param = value
        elif isinstance(value, int):
            param.int64_param = value
        elif isinstance(value, float):
            param.double_param = value
        else:
            param.string_param = str(value)


#: The protocol's data type names (``"FP32"``...), looked up once per request input.
_DATATYPES = {member.value: member for member in DataType}


def _datatype(name: str, text: str) -> DataType:
    datatype = _DATATYPES.get(text)
    if datatype is None:
        raise TritonError.invalid_arg(f"invalid datatype '{text}' for input '{name}'")
    return datatype


def _from_contents(
    name: str,
    datatype: DataType,
    shape: list[int],
    contents: pb.InferTensorContents,
    mismatched: list[ByteSizeMismatch],
) -> Any:
    """The array typed ``contents`` hold; too many or too few values are recorded in
    ``mismatched`` as Triton finds them, by the bytes (or strings) they make."""
    field = CONTENTS_FIELD.get(datatype)
    if field is None:
        raise TritonError.invalid_arg(
            f"input '{name}' of type {datatype.value} must be sent in raw_input_contents"
        )
    values = getattr(contents, field)
    count = element_count(name, shape)
    if len(values) != count:
        mismatch: ByteSizeMismatch
        if datatype is DataType.BYTES:
            kind, seen = ("too_many", count + 1) if len(values) > count else ("too_few", len(values))
            mismatch = StringsMismatch(name, kind, count, seen)
        else:
            mismatch = ByteSizeMismatch(name, count * datatype.itemsize, len(values) * datatype.itemsize)
        return stand_in(mismatch, datatype, shape, mismatched)
    if datatype is DataType.BYTES:
        array = np.empty(count, dtype=np.object_)
        array[:] = list(values)
        return array.reshape(shape)
    try:
        return np.array(values, dtype=datatype.numpy_dtype).reshape(shape)
    except OverflowError:
        raise TritonError.invalid_arg(f"a value of input '{name}' does not fit {datatype.value}") from None


#: Where requested outputs go in shared memory, by output name (None: nowhere).
OutputSlots = dict[str, OutputSlot] | None


def request_from_proto(
    msg: pb.ModelInferRequest, memory: SystemSharedMemory | None = None
) -> tuple[InferenceRequest, OutputSlots]:
    """The core request for a ModelInferRequest (raises TritonError INVALID_ARG),
    and the shared-memory slots of its requested outputs."""
    shared: dict[str, dict[str, ParameterValue]] = {}
    entries = list(msg.inputs)  # one wrapper per input, not one per pass
    for entry in entries:  # first: such an input has no raw contents to count
        if entry.parameters:
            params = parameters_from_proto(entry.parameters)
            if REGION in params:
                shared[entry.name] = params
    raw = msg.raw_input_contents
    inputs: dict[str, Tensor] = {}
    #: Inputs whose data is not the size their shape needs (checked last, as Triton does).
    mismatched: list[ByteSizeMismatch] = []
    i = 0
    for entry in entries:
        name = entry.name
        if name in inputs:
            raise already_exists(msg.id, "input", name)
        datatype = _datatype(name, entry.datatype)
        shape = list(entry.shape)
        if shared and name in shared:
            if entry.HasField("contents"):
                raise TritonError.invalid_arg(f"input '{name}' has both 'contents' and '{REGION}'; send one")
            inputs[name] = _memory(memory).input_tensor(name, datatype, shape, shared[name], mismatched)
            continue
        if raw:
            if entry.HasField("contents"):  # Triton's words, checked before the count
                raise TritonError.invalid_arg(
                    "contents field must not be specified when using raw_input_contents for "
                    f"'{name}' for model '{msg.model_name}'"
                )
            if i >= len(raw):  # as Triton, more raw contents than inputs are left unread
                raise _no_data(name, msg.model_name)
            array = array_from_buffer(name, datatype, shape, raw[i], mismatched)
            i += 1
        elif entry.HasField("contents"):
            array = _from_contents(name, datatype, shape, entry.contents, mismatched)
        else:
            raise _no_data(name, msg.model_name)
        inputs[name] = Tensor(name, array, datatype)
    model_version = parse_version(msg.model_version)
    slots: OutputSlots = None
    outputs: list[RequestedOutput] = []
    for o in msg.outputs:
        if outputs and any(r.name == o.name for r in outputs):
            raise already_exists(msg.id, "output", o.name)
        params = parameters_from_proto(o.parameters) if o.parameters else {}
        device: int | None = None
        if params and REGION in params:
            if slots is None:
                slots = {}
            slot = slots[o.name] = _memory(memory).output_slot(o.name, params)
            device = slot.device_id  # a CUDA region's GPU: the backend may produce it there
            for key in SHARED_MEMORY_KEYS:
                params.pop(key, None)
        outputs.append(RequestedOutput(o.name, params, device))
    request = InferenceRequest(
        model_name=msg.model_name,
        model_version=model_version,
        inputs=inputs,
        requested_outputs=outputs,
        id=msg.id,
        parameters=_request_parameters(msg) if msg.parameters else {},
    )
    if mismatched:
        raise InputSizes(request, mismatched)
    return request, slots


#: The one request parameter of Triton's own a gRPC client may send: a stream's flag
#: (``ModelStreamInfer`` reads it from the message); the model never sees it.
EMPTY_FINAL = "triton_enable_empty_final_response"


def empty_final(msg: pb.ModelInferRequest) -> bool:
    """Whether a request asked for the empty final response (``EMPTY_FINAL``); a message
    without the key (every unary one) pays one map lookup."""
    if EMPTY_FINAL not in msg.parameters:
        return False
    return bool(parameters_from_proto(msg.parameters).get(EMPTY_FINAL))


#: The kinds of value Triton's gRPC front end takes for each reserved request parameter, as
#: its messages name them; ``uint64_param`` is taken too for the integer ones (tritonpy's
#: leniency: Triton refuses it for ``timeout`` and ``sequence_id``).
_RESERVED_KINDS = {
    "timeout": "int64_param",
    "priority": "int64_param or uint64_param",
    "sequence_id": "int64_param or string_param",
    "sequence_start": "bool_param",
    "sequence_end": "bool_param",
}


def _reserved_parameters(msg: pb.ModelInferRequest, params: dict[str, ParameterValue]) -> None:
    """Check the reserved parameters' kinds in Triton's gRPC words; a negative ``timeout`` or
    ``sequence_id`` is taken as its unsigned 64-bit value, as Triton's C API takes it."""
    for key, kinds in _RESERVED_KINDS.items():
        if key not in params:
            continue
        which = msg.parameters[key].WhichOneof("parameter_choice")
        if which not in kinds and not (which == "uint64_param" and "int64_param" in kinds):
            raise TritonError.invalid_arg(f"invalid value type for '{key}' parameter, expected {kinds}.")
        value = params[key]
        if which == "int64_param" and isinstance(value, int) and value < 0:
            if key == "priority":
                raise TritonError.invalid_arg("invalid value for 'priority', expected value >= 0.")
            params[key] = value + 2**64


def _request_parameters(msg: pb.ModelInferRequest) -> dict[str, ParameterValue]:
    """A request's parameters as the model gets them: Triton's ``EMPTY_FINAL`` left out,
    any other key starting with ``triton_`` refused (Triton's words); the reserved ones
    checked as Triton's gRPC front end checks them (``_reserved_parameters``)."""
    params = parameters_from_proto(msg.parameters)
    _reserved_parameters(msg, params)
    for key in params:
        if key.startswith("triton_") and key != EMPTY_FINAL:
            raise TritonError.invalid_arg(
                "parameter keys starting with 'triton_' are reserved for Triton usage. Only the "
                f"following keys starting with 'triton_' are allowed: {EMPTY_FINAL}"
            )
    params.pop(EMPTY_FINAL, None)
    return params


#: A decoded ModelInferRequest (``RequestPlans.decode``): the request, its output slots in
#: shared memory, the message (None: decoded from a plan, not parsed) and whether it asked
#: for the empty final response.
Decoded = tuple[InferenceRequest, OutputSlots, "pb.ModelInferRequest | None", bool]


class RequestPlans:
    """ModelInferRequests decoded from a plan: a client sends the same message every call
    but for its raw input contents and its id (perf_analyzer, most clients), so what
    ``request_from_proto`` makes of the rest is kept, keyed by those bytes, and the next
    such message is split, not parsed: its inputs are views of its raw contents.

    Only for a message that ``request_from_proto`` decoded without shared memory,
    parameters on its inputs or outputs, or typed contents, whose raw contents come last
    and number one per input (``learn``). Anything else, and a planned message whose
    inputs do not fit (``request`` returns None), goes through the general decoding,
    which gives its error. A plan is made the second time its layout comes (a client
    whose messages differ each call, e.g. by their sequence id, makes none; it pays one
    split per call). At most ``size`` plans, and ``4 * size`` layouts seen once; each
    is dropped whole when full.
    """

    __slots__ = ("_plans", "_seen", "size")

    def __init__(self, size: int = 64) -> None:
        self._plans: dict[bytes, _Plan] = {}
        self._seen: set[bytes] = set()
        self.size = size

    @staticmethod
    def split(data: bytes) -> _Split | None:
        """Where ``data``'s parts lie, for ``request`` and ``learn`` (None: not a message
        any plan is for). It holds none of ``data``'s raw contents."""
        return _split(data)

    def request(self, data: bytes, split: _Split) -> InferenceRequest | None:
        """The request for ``data`` (``split``) from its plan, or None (no plan: decode
        it in full)."""
        plan = self._plans.get(split[0])
        return None if plan is None else _planned(plan, data, split)

    def decode(self, data: bytes, shared_memory: SystemSharedMemory | None) -> Decoded | None:
        """``data`` as a request: from its plan when one fits, else decoded in full by
        ``request_from_proto`` (and its plan learned). None when ``data`` is not a
        ModelInferRequest; a message that does not decode raises ``request_from_proto``'s
        ``TritonError``."""
        split = _split(data)
        if split is not None:
            plan = self._plans.get(split[0])
            planned = None if plan is None else _planned(plan, data, split)
            if plan is not None and planned is not None:
                return planned, None, None, plan.empty_final
        try:
            msg = pb.ModelInferRequest.FromString(data)
        except Exception:
            return None
        request, slots = request_from_proto(msg, shared_memory)
        if split is not None:
            self.learn(split, msg, request, slots)
        return request, slots, msg, empty_final(msg)

    def learn(
        self, split: _Split, msg: pb.ModelInferRequest, request: InferenceRequest, slots: OutputSlots
    ) -> None:
        """Keep the plan of a message (``split``, decoded as ``msg`` into ``request``)
        when it has one and its layout came before."""
        if slots is not None:
            return
        key, _, raws = split
        if key in self._plans:
            return
        if key not in self._seen:
            if len(self._seen) >= 4 * self.size:
                self._seen.clear()
            self._seen.add(key)
            return
        if not msg.raw_input_contents or len(msg.raw_input_contents) != len(msg.inputs):
            return
        for entry in msg.inputs:
            if entry.parameters or entry.HasField("contents"):
                return
        for output in msg.outputs:
            if output.parameters:
                return
        if len(raws) != len(request.inputs):
            return
        self._seen.discard(key)
        if len(self._plans) >= self.size:
            self._plans.clear()
        self._plans[key] = _Plan(
            request.model_name,
            request.model_version,
            dict(request.parameters),
            [
                (
                    t.name,
                    t.datatype,
                    list(t.data.shape),
                    None if t.datatype is DataType.BYTES else t.datatype.numpy_dtype,
                    int(t.data.size),
                )
                for t in request.inputs.values()
            ],
            [o.name for o in request.requested_outputs],
            empty_final(msg),
        )


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a ModelInferRequest's bytes other than its raw contents and id decode to."""

    model_name: str
    model_version: int
    parameters: dict[str, ParameterValue]
    #: name, data type, shape, numpy dtype (None: BYTES), elements
    inputs: list[tuple[str, DataType, list[int], np.dtype[Any] | None, int]]
    outputs: list[str]
    #: Whether the message asked for the empty final response (``EMPTY_FINAL``, which
    #: the request's parameters leave out).
    empty_final: bool


def _planned(plan: _Plan, data: bytes, split: _Split) -> InferenceRequest | None:
    """The request for ``data`` (``split``) from ``plan``, or None when its inputs do not fit
    the plan (the general decoding words the error)."""
    _, rid, raws = split
    if len(raws) != len(plan.inputs):
        return None
    try:
        inputs: dict[str, Tensor] = {}
        for (name, datatype, shape, dtype, count), (start, end) in zip(plan.inputs, raws, strict=True):
            if dtype is None:  # BYTES
                array = array_from_buffer(name, datatype, shape, memoryview(data)[start:end])
            elif end - start != count * dtype.itemsize:
                return None  # the general decoding words the error
            else:  # as array_from_buffer: a read-only view of the message's bytes
                array = np.frombuffer(data, dtype, count, start).reshape(shape)
            inputs[name] = Tensor(name, array, datatype)
        request_id = rid.decode() if rid else ""
    except Exception:  # the general decoding words the error
        return None
    return InferenceRequest(
        model_name=plan.model_name,
        model_version=plan.model_version,
        inputs=inputs,
        requested_outputs=[RequestedOutput(name, {}, None) for name in plan.outputs],
        id=request_id,
        parameters=dict(plan.parameters),
    )


#: The most bytes of a message, less its id and raw contents, that a plan is kept for.
_KEY_MAX = 4096
#: raw_input_contents (field 7) and id (field 3), length-delimited.
_RAW_TAG, _ID_TAG = 0x3A, 0x1A


#: A message's bytes less its id and raw contents, its id's bytes, its raw contents' spans.
_Split = tuple[bytes, bytes, list[tuple[int, int]]]


def _split(data: bytes) -> _Split | None:
    """(the message's bytes less its id and raw contents, the id's bytes, where each raw
    content lies) when its fields are all length-delimited with one-byte tags, the id
    at most once, and the raw contents last; else None."""
    pos, end = 0, len(data)
    first_raw = id_start = id_end = -1
    rid = (0, 0)
    raws: list[tuple[int, int]] = []
    while pos < end:
        tag = data[pos]
        if tag & 0x87 != 2:  # a longer tag, or not length-delimited: not a message we plan
            return None
        at = pos
        pos += 1
        length = shift = 0
        while True:
            if pos >= end or shift > 28:
                return None
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        stop = pos + length
        if stop > end:
            return None
        if tag == _RAW_TAG:
            if first_raw < 0:
                first_raw = at
            raws.append((pos, stop))
        elif first_raw >= 0:
            return None  # a field after the raw contents
        elif tag == _ID_TAG:
            if id_start >= 0:
                return None
            id_start, id_end = at, stop
            rid = (pos, stop)
        pos = stop
    if first_raw < 0 or first_raw > _KEY_MAX + id_end - id_start:
        return None  # no raw contents, or more than a plan keeps of the rest
    if id_start < 0:
        return data[:first_raw], b"", raws
    return data[:id_start] + data[id_end:first_raw], data[rid[0] : rid[1]], raws


def _memory(memory: SystemSharedMemory | None) -> SystemSharedMemory:
    if memory is None:
        raise TritonError.invalid_arg(
            "shared memory regions are not available here: send the tensor's data in the request"
        )
    return memory


def response_to_proto(response: InferenceResponse, slots: OutputSlots = None) -> pb.ModelInferResponse:
    """The ModelInferResponse; outputs with a slot in ``slots`` are written there
    and sent with empty raw contents (as Triton does)."""
    msg = pb.ModelInferResponse(
        model_name=response.model_name, model_version=str(response.model_version), id=response.id
    )
    parameters_to_proto(response.parameters, msg.parameters)
    raw = msg.raw_output_contents
    for name, tensor in response.outputs.items():
        msg.outputs.add(name=name, datatype=tensor.datatype.value, shape=tensor.shape)
        slot = slots.get(name) if slots else None
        if slot is not None:
            slot.write_tensor(tensor)
            raw.append(b"")
        else:
            raw.append(bytes(array_to_buffer(tensor.data, tensor.datatype)))
    return msg


#: A varint's bytes for the values below 128, made once.
_SMALL = [bytes((n,)) for n in range(128)]
_UINT64 = (1 << 64) - 1


def _varint(value: int) -> bytes:
    """A protobuf varint (a negative int64 as its 64-bit two's complement, 10 bytes)."""
    if 0 <= value < 128:
        return _SMALL[value]
    value &= _UINT64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(tag: bytes, text: str) -> bytes:
    """A proto3 string field (left out when empty, as protobuf writes it)."""
    if not text:
        return b""
    data = text.encode()
    return tag + _varint(len(data)) + data


class ResponseEncoder:
    """``response_to_proto(response).SerializeToString()`` without message objects: a
    model's responses have the same name, version and outputs' names, data types and
    shapes each call, so those fields' bytes are made once and kept, and each response
    adds its id and its outputs' raw contents (one copy of each, then one join).

    For a response without parameters whose outputs all go in ``raw_output_contents``
    (no shared-memory slots); ``encode`` returns None for any other, which
    ``response_to_proto`` encodes. At most ``size`` kept; all dropped when full.
    ``encode_stream`` writes the same response as a ``ModelStreamInferResponse``, with
    the ``triton_final_response`` parameter every stream response carries.
    """

    __slots__ = ("_heads", "size")

    def __init__(self, size: int = 64) -> None:
        self._heads: dict[tuple[Any, ...], tuple[bytes, bytes]] = {}
        self.size = size

    def encode(self, response: InferenceResponse) -> bytes | None:
        parts = self._parts(response, b"")
        return None if parts is None else b"".join(parts)

    def encode_stream(self, response: InferenceResponse, final: bool) -> bytes | None:
        """``ModelStreamInferResponse(infer_response=out).SerializeToString()`` where ``out``
        is ``response_to_proto(response)`` with ``triton_final_response`` = ``final``."""
        parts = self._parts(response, _FINAL_TRUE if final else _FINAL_FALSE)
        if parts is None:
            return None
        size = 0
        for part in parts:
            size += len(part)
        parts[0] = b"\x12" + _varint(size) + parts[0]  # field 2, infer_response
        return b"".join(parts)

    def _parts(self, response: InferenceResponse, parameters: bytes) -> list[bytes] | None:
        """The message's pieces in field order; ``parameters``: field 4's bytes."""
        rid = response.id
        if response.parameters or type(rid) is not str or type(response.model_version) is not int:
            return None
        outputs = response.outputs
        key = (
            response.model_name,
            response.model_version,
            *[(name, tensor.datatype, tensor.shape) for name, tensor in outputs.items()],
        )
        heads = self._heads.get(key)
        if heads is None:
            heads = self._heads_of(response)
            if heads is None:
                return None
        first, tensors = heads
        parts: list[bytes] = [first, _string(b"\x1a", rid), parameters, tensors]
        for tensor in outputs.values():
            data, datatype = tensor.data, tensor.datatype
            if type(data) is np.ndarray and datatype is not DataType.BYTES:
                raw = data.tobytes()  # C order, as array_to_buffer's contiguous view
            else:
                raw = bytes(array_to_buffer(data, datatype))
            parts += (b"\x32", _varint(len(raw)), raw)
        return parts

    def _heads_of(self, response: InferenceResponse) -> tuple[bytes, bytes] | None:
        """Fields 1 and 2 (name, version), and 5 (the outputs' metadata), or None when a
        field is not what ``response_to_proto`` would write as given."""
        name = response.model_name
        if type(name) is not str:
            return None
        first = _string(b"\x0a", name) + _string(b"\x12", str(response.model_version))
        entries: list[bytes] = []
        key: list[Any] = [response.model_name, response.model_version]
        for output, tensor in response.outputs.items():
            shape = tensor.shape
            if type(output) is not str or not all(type(d) is int for d in shape):
                return None
            packed = b"".join([_varint(d) for d in shape])
            body = (
                _string(b"\x0a", output)
                + _string(b"\x12", tensor.datatype.value)
                + (b"\x1a" + _varint(len(packed)) + packed if packed else b"")
            )
            entries.append(b"\x2a" + _varint(len(body)) + body)
            key.append((output, tensor.datatype, shape))
        if len(self._heads) >= self.size:
            self._heads.clear()
        heads = self._heads[tuple(key)] = (first, b"".join(entries))
        return heads


def _final_parameter(final: bool) -> bytes:
    """Field 4 of a stream response: ``triton_final_response`` = ``final``, as protobuf writes it."""
    msg = pb.ModelInferResponse()
    msg.parameters[FINAL_RESPONSE].bool_param = final
    return bytes(msg.SerializeToString())


#: The parameter Triton sets on every ModelStreamInfer response: whether it is the request's last.
FINAL_RESPONSE = "triton_final_response"
_FINAL_TRUE, _FINAL_FALSE = _final_parameter(True), _final_parameter(False)


def _no_data(name: str, model: str) -> TritonError:
    """Triton's words for an input with neither raw contents, typed contents nor a region."""
    return TritonError.invalid_arg(
        f"unable to find data for input tensor '{name}' for model '{model}' in request."
    )
