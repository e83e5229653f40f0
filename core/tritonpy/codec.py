"""Tensor data to and from the wire, shared by every front end.

Binary data becomes a numpy array with ``numpy.frombuffer`` (a view of the
request body, no copy); JSON data is checked for its element count. Messages
use Triton's wording so that users' searches find answers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from tritonpy_sdk import (
    DataType,
    ErrorCode,
    InferenceRequest,
    TritonError,
    deserialize_bytes_tensor,
    serialize_bytes_tensor,
)

#: The largest element count (and byte size) of a tensor, as Triton counts them.
INT64_MAX = 2**63 - 1
#: Most dimensions a tensor may have here (numpy's limit; Triton's core has none).
MAX_DIMS = 64


def element_count(name: str, shape: Sequence[int]) -> int:
    """Elements in a tensor of ``shape``; negative dims, or more than ``MAX_DIMS`` of
    them, are a client error."""
    if len(shape) > MAX_DIMS:
        raise TritonError.invalid_arg(
            f"unexpected shape for input '{name}': {len(shape)} dimensions, more than the "
            f"{MAX_DIMS} a tensor may have"
        )
    for d in shape:
        if d < 0:
            raise TritonError.invalid_arg(f"input '{name}' has a negative dimension in shape {list(shape)}")
    count = math.prod(shape)
    if count > INT64_MAX:  # Triton's words (since 2.60)
        raise TritonError.invalid_arg(
            f"invalid shape for input '{name}': shape [{','.join(map(str, shape))}] causes total element "
            f"count to exceed maximum size of {INT64_MAX}"
        )
    return count


def request_prefix(request_id: object) -> str:
    """What Triton puts before most errors about a request (its ``LogRequest``): the id
    when it is a non-empty string (as a request's JSON may give anything)."""
    known = request_id if isinstance(request_id, str) and request_id else "<id_unknown>"
    return f"[request id: {known}] "


def already_exists(request_id: object, what: str, name: str) -> TritonError:
    """Triton's INVALID_ARG for a request naming an input or output (``what``) twice."""
    return TritonError.invalid_arg(f"{request_prefix(request_id)}{what} '{name}' already exists in request")


def array_from_buffer(
    name: str,
    datatype: DataType,
    shape: Sequence[int],
    buffer: bytes | memoryview,
    mismatched: list[ByteSizeMismatch] | None = None,
) -> np.ndarray[Any, Any]:
    """The array that ``buffer`` holds for an input of ``datatype`` and ``shape``.

    Fixed-size types are a read-only view of ``buffer``; BYTES are decoded. Data of
    the wrong size raises ``ByteSizeMismatch``, or, given ``mismatched``, is recorded
    there and stood in for (``stand_in``).
    """
    count = element_count(name, shape)
    if datatype is DataType.BYTES:
        try:
            flat = deserialize_bytes_tensor(buffer)
        except TritonError:  # malformed: found again below, to be worded as Triton words it
            flat = None
        if flat is not None and flat.size == count:
            return flat.reshape(shape)
        return stand_in(strings_mismatch(name, buffer, count), datatype, shape, mismatched)
    expected = count * datatype.itemsize
    if len(buffer) != expected:
        return stand_in(ByteSizeMismatch(name, expected, len(buffer)), datatype, shape, mismatched)
    return np.frombuffer(buffer, dtype=datatype.numpy_dtype, count=count).reshape(shape)


class ByteSizeMismatch(TritonError):
    """An input of a fixed-size type whose data is not the bytes its shape needs."""

    def __init__(self, name: str, expected: int, given: int) -> None:
        self.name = name
        self.expected = expected
        self.given = given
        super().__init__(self.fault(None, ""), ErrorCode.INVALID_ARG)

    def fault(self, model: str | None, prefix: str) -> str:
        """Triton's words, naming ``model`` once it is known, after the request's ``prefix``."""
        where = f" for model '{model}'" if model else ""
        return (
            f"{prefix}input byte size mismatch for input '{self.name}'{where}. "
            f"Expected {self.expected}, got {self.given}"
        )


class StringsMismatch(ByteSizeMismatch):
    """BYTES data that does not hold its shape's elements in Triton's encoding (each a
    4-byte little-endian length, then the bytes), found as Triton scans it: ``kind`` is
    ``indicator`` (a length cut off: ``given`` bytes of it left), ``too_many`` (``given``
    elements counted of ``expected``), ``too_few`` (likewise) or ``truncated`` (the last
    element's ``expected`` bytes with ``given`` left: Triton's backends find that one, and
    word it without the request or the model)."""

    def __init__(self, name: str, kind: str, expected: int, given: int) -> None:
        self.kind = kind
        super().__init__(name, expected, given)

    def fault(self, model: str | None, prefix: str) -> str:
        name, expected, given = self.name, self.expected, self.given
        where = f" for model '{model}'" if model else ""
        if self.kind == "indicator":
            return (
                f"{prefix}incomplete string length indicator for inference input '{name}'{where}, "
                f"expecting 4 bytes but only {given} bytes available. Please make sure the string "
                "length indicator is in one buffer."
            )
        if self.kind == "too_many":
            return (
                f"{prefix}unexpected number of string elements {given} for inference input "
                f"'{name}'{where}, expecting {expected}"
            )
        if self.kind == "too_few":
            return (
                f"{prefix}expected {expected} string elements for inference input '{name}'{where}, "
                f"got {given}"
            )
        return (
            f"incomplete string data for inference input '{name}', expecting string of length "
            f"{expected} but only {given} bytes available"
        )


def strings_mismatch(name: str, buffer: bytes | memoryview, count: int) -> StringsMismatch:
    """What is wrong with BYTES data that is not ``count`` well-formed elements, found in
    Triton's order: a cut-off length or one element too many as the scan meets them, then
    too few elements, then a last element shorter than its length says."""
    view = memoryview(buffer)
    n = len(view)
    pos = seen = 0
    while pos < n:
        if n - pos < 4:
            return StringsMismatch(name, "indicator", 4, n - pos)
        size = int.from_bytes(view[pos : pos + 4], "little")
        pos += 4
        seen += 1
        if seen > count:
            return StringsMismatch(name, "too_many", count, seen)
        if pos + size > n:
            if seen != count:
                return StringsMismatch(name, "too_few", count, seen)
            return StringsMismatch(name, "truncated", size, n - pos)
        pos += size
    return StringsMismatch(name, "too_few", count, seen)


class InputSizes(TritonError):
    """A decoded request some of whose inputs brought data of the wrong size
    (``mismatches``; their tensors are ``stand_in``s).

    Triton checks byte sizes last, after the names, batch, data types and shapes of
    the request's inputs against the model's config, and names the model: a front
    end that has the config at hand words the error as Triton does
    (``runtime.validation.size_error``). Unexplained, it is the first mismatch's own
    error.
    """

    def __init__(self, request: InferenceRequest, mismatches: list[ByteSizeMismatch]) -> None:
        super().__init__(mismatches[0].message, ErrorCode.INVALID_ARG)
        self.request = request
        self.mismatches = mismatches


def stand_in(
    mismatch: ByteSizeMismatch,
    datatype: DataType,
    shape: Sequence[int],
    found: list[ByteSizeMismatch] | None,
) -> np.ndarray[Any, Any]:
    """An array of ``shape`` standing for an input whose data did not fit it, so that the
    rest of the request can be checked before its size is reported (``InputSizes``):
    one zero broadcast, no memory, read-only. ``found`` records ``mismatch``; without
    ``found``, or where no such array can be made (a shape too large to index),
    ``mismatch`` is raised."""
    if found is None:
        raise mismatch
    try:
        array = np.broadcast_to(np.zeros((), datatype.numpy_dtype), tuple(shape))
    except (ValueError, TypeError):
        raise mismatch from None
    found.append(mismatch)
    return array


#: How deep a ``data`` array may nest (Triton's ``HTTP_MAX_JSON_NESTING_DEPTH``, 2.59 on).
MAX_JSON_DEPTH = 100


def _flatten(data: Any, out: list[Any], depth: int = 0) -> None:
    """Append the elements of nested lists ``data`` (itself at ``depth``) to ``out``;
    an element at ``MAX_JSON_DEPTH`` or deeper is refused in Triton's words."""
    if depth + 1 >= MAX_JSON_DEPTH:
        raise TritonError.invalid_arg(f"JSON nesting depth exceeds maximum allowed limit ({MAX_JSON_DEPTH})")
    for item in data:
        if isinstance(item, list):
            _flatten(item, out, depth + 1)
        else:
            out.append(item)


def array_from_json(
    name: str,
    datatype: DataType,
    shape: Sequence[int],
    data: Any,
    mismatched: list[ByteSizeMismatch] | None = None,
) -> np.ndarray[Any, Any]:
    """The array for JSON ``data`` (flat or nested lists, or one value) of ``datatype``
    and ``shape``. Each element must be of the JSON type Triton reads for ``datatype``
    (no number for a string, no 2.0 or true for an integer), refused in Triton's words
    and order. BYTES data of the wrong count is recorded in ``mismatched`` as
    ``array_from_buffer`` records it (Triton checks it with the byte sizes); given no
    ``mismatched``, it raises."""
    count = element_count(name, shape)
    itemsize = datatype.itemsize  # 0 for BYTES
    if itemsize > 1 and count > INT64_MAX // itemsize:  # Triton's words (since 2.60)
        raise TritonError.invalid_arg(
            f"byte size overflow for input '{name}': element count ({count}) * data type size "
            f"({itemsize}) exceeds maximum allowed size ({INT64_MAX})"
        )
    if not isinstance(data, list):
        data = [data]
    flat: list[Any]
    if list not in set(map(type, data)):  # already flat (the usual case): no copy
        flat = data
    else:
        flat = []
        _flatten(data, flat)
    # Triton reads every BYTES element (for the byte size) before it counts them, and
    # other types element by element, stopping at the first one past the count.
    _check_json_types(datatype, flat if datatype is DataType.BYTES or len(flat) <= count else flat[:count])
    if len(flat) != count:
        if datatype is DataType.BYTES:
            kind, seen = ("too_many", count + 1) if len(flat) > count else ("too_few", len(flat))
            return stand_in(StringsMismatch(name, kind, count, seen), datatype, shape, mismatched)
        raise TritonError.invalid_arg(  # Triton's words (and the numbers)
            f"Unable to parse 'data': Shape does not match true shape of 'data' field (input "
            f"'{name}' of shape {list(shape)} needs {count} elements, got {len(flat)})"
        )
    if datatype is DataType.BYTES:
        arr = np.empty(count, dtype=np.object_)
        arr[:] = [v.encode("utf-8") for v in flat]
    elif datatype is DataType.BOOL:
        arr = np.array(flat, dtype=np.bool_)
    elif datatype in (DataType.FP16, DataType.FP32, DataType.FP64, DataType.BF16):
        arr = np.array(flat, dtype=np.float64).astype(datatype.numpy_dtype)
    else:
        low, high = _int_range(datatype)
        if flat and (min(flat) < low or max(flat) > high):
            # Triton keeps the low bits (300 as a UINT8 is 44): refused here.
            raise TritonError.invalid_arg(
                f"unable to parse 'data' of input '{name}' as {datatype.value}: "
                f"value out of range for {datatype.value}"
            )
        arr = np.array(flat, dtype=datatype.numpy_dtype)
    return arr.reshape(shape)


#: The Python types of the JSON values Triton's inference route reads for a data
#: type's kind, and its words (its JSON reader's) for any other.
_JSON_ELEMENT: dict[str, tuple[frozenset[type], str]] = {
    "b": (frozenset({bool}), "Unable to parse 'data': attempt to access JSON non-boolean as boolean"),
    "u": (
        frozenset({int}),
        "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer",
    ),
    "i": (
        frozenset({int}),
        "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer",
    ),
    "f": (frozenset({int, float}), "Unable to parse 'data': attempt to access JSON non-number as double"),
    "O": (frozenset({str}), "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
}


@functools.cache
def _int_range(datatype: DataType) -> tuple[int, int]:
    info = np.iinfo(datatype.numpy_dtype)
    return int(info.min), int(info.max)


#: The integers Triton's reader takes as unsigned / signed (64 bits).
_JSON_RANGE = {"u": (0, (1 << 64) - 1), "i": (-(1 << 63), (1 << 63) - 1)}


def _check_json_types(datatype: DataType, values: list[Any]) -> None:
    """Refuse ``values`` as Triton's inference route refuses them (no element names)."""
    kind = "f" if datatype is DataType.BF16 else datatype.numpy_dtype.kind
    rule = _JSON_ELEMENT.get(kind)
    if rule is None or not values:
        return
    types, words = rule
    if not set(map(type, values)) <= types:  # type(), not isinstance: true is no integer
        raise TritonError.invalid_arg(words)
    bounds = _JSON_RANGE.get(kind)
    if bounds is not None and (min(values) < bounds[0] or max(values) > bounds[1]):
        raise TritonError.invalid_arg(words)


def array_to_buffer(array: np.ndarray[Any, Any], datatype: DataType) -> bytes | memoryview:
    """The wire bytes of ``array``: a view of its memory when it is contiguous."""
    if datatype is DataType.BYTES:
        return serialize_bytes_tensor(array)
    arr = np.ascontiguousarray(array)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return memoryview(arr.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # numpy arrays are buffers


def array_to_json(array: np.ndarray[Any, Any], datatype: DataType, name: str = "") -> list[Any]:
    """``array`` (output ``name``) as a flat JSON list (BYTES as UTF-8 text, BF16 as floats).

    BYTES elements that are not UTF-8 cannot be JSON text: INVALID_ARG saying to ask
    for the output as binary data. (Triton writes the bytes into its JSON as they are,
    which no JSON reader takes: tritonclient then fails with "Failed to encode using
    UTF-8. Please use binary_data=True".)"""
    flat = array.reshape(-1)
    if datatype is DataType.BYTES:
        try:
            return [(v if isinstance(v, bytes) else str(v).encode()).decode("utf-8") for v in flat]
        except UnicodeDecodeError as exc:
            raise TritonError.invalid_arg(
                f"output '{name}' holds bytes that are not UTF-8 text ({exc.reason} at byte "
                f"{exc.start} of an element), which JSON cannot carry: request it with "
                "binary_data: true"
            ) from None
    if datatype is DataType.BF16:
        return flat.astype(np.float32).tolist()  # type: ignore[no-any-return]
    return flat.tolist()  # type: ignore[no-any-return]
