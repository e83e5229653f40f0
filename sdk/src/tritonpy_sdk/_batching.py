"""Helpers to run a batch of requests as one framework call.

``gather_inputs`` concatenates one input of every request along the batch
dimension with one copy (none for a single request), through ``batch_arrays``
(the arrays, checked to batch) and ``copy_rows`` (the copy, holding the GIL); ``scatter_output`` cuts a
batched output back into per-request views without copying, and
``scatter_responses`` makes each request's response of such views.
``outputs_to_compute`` says which outputs a batch needs at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ._datatype import DataType
from ._errors import TritonError
from ._inference import InferenceRequest, InferenceResponse
from ._tensor import Tensor

Allocator = Callable[[tuple[int, ...], np.dtype[Any]], np.ndarray[Any, Any]]


def batch_sizes(requests: Sequence[InferenceRequest]) -> list[int]:
    """Each request's batch size, in order."""
    return [r.batch_size for r in requests]


def batch_arrays(requests: Sequence[InferenceRequest], name: str) -> list[np.ndarray[Any, Any]]:
    """Input ``name`` of every request, checked to batch: the same shape beyond the batch
    dimension and the same dtype (the core's scheduler only batches such requests together)."""
    if not requests:
        raise TritonError.internal("a batch of no requests")
    try:
        arrays = [r.inputs[name].data for r in requests]
    except KeyError:
        raise TritonError.invalid_arg(f"input '{name}' is missing from a request in the batch") from None
    first = arrays[0]
    tail = first.shape[1:]
    for a in arrays[1:]:
        if a.shape[1:] != tail or a.dtype != first.dtype:
            raise TritonError.internal(
                f"cannot batch input '{name}': shapes {first.shape} and {a.shape} "
                f"(or dtypes {first.dtype}, {a.dtype}) differ beyond the batch dimension"
            )
    return arrays


def gather_inputs(
    requests: Sequence[InferenceRequest],
    name: str,
    *,
    allocator: Allocator | None = None,
) -> np.ndarray[Any, Any]:
    """Input ``name`` of all ``requests`` as one array batched on axis 0.

    A single request's array is returned as it is (no copy). Otherwise the
    arrays are copied once into a buffer from ``allocator`` (default
    ``numpy.empty``; pass a pinned-memory allocator for GPU instances), by
    ``copy_rows``. All requests must carry the input with equal non-batch shapes
    and dtypes (``batch_arrays``).
    """
    arrays = batch_arrays(requests, name)  # (an empty batch is an error there)
    if len(arrays) == 1:
        return arrays[0]
    first = arrays[0]
    shape = (sum(a.shape[0] for a in arrays), *first.shape[1:])
    out = allocator(shape, first.dtype) if allocator else np.empty(shape, first.dtype)
    copy_rows(out, arrays)
    return out


def copy_rows(target: np.ndarray[Any, Any], arrays: Sequence[np.ndarray[Any, Any]]) -> None:
    """``arrays`` one after the other into the rows of ``target`` (C-contiguous, of their
    dtype and total rows), holding the GIL throughout.

    ``numpy.concatenate`` gives the GIL up around the copy of every array of more than a few
    hundred elements, and takes it back each time against every other busy thread of the
    process (the event loop decoding the next requests, other instances): a gather of 32
    224×224 RGB images that takes ~2 ms alone took ~25 ms beside one busy Python thread and
    ~100 ms beside two on a 2-core host, against ~5 and ~20 ms this way (the GIL is then only
    given up at the interpreter's switch interval). A memoryview slice assignment is one
    memmove under the GIL; object arrays (BYTES: references, not bytes), arrays of
    another dtype than ``target`` and arrays the buffer protocol cannot describe as bytes
    (not C-contiguous) are copied by numpy instead.
    """
    view: memoryview | None = None
    if not target.dtype.hasobject:  # object arrays hold references: never copied as bytes
        try:
            view = memoryview(target).cast("B")  # type: ignore[arg-type]
        except (TypeError, ValueError, BufferError):
            view = None
    whole = len(arrays) == 1 and arrays[0].shape == target.shape  # 0-d included
    offset = row = 0
    for a in arrays:
        size = a.nbytes
        moved = False
        if view is not None and a.dtype == target.dtype:
            try:
                view[offset : offset + size] = memoryview(a).cast("B")  # type: ignore[arg-type]
                moved = True
            except (TypeError, ValueError, BufferError, NotImplementedError):
                pass  # not C-contiguous, or a dtype the buffer protocol cannot describe
        if not moved:
            np.copyto(target if whole else target[row : row + a.shape[0]], a)
        offset += size
        row += a.shape[0] if a.ndim else 1


def scatter_output(array: np.ndarray[Any, Any], sizes: Sequence[int]) -> list[np.ndarray[Any, Any]]:
    """Split a batched output along axis 0 into views of ``sizes`` rows each."""
    if len(sizes) == 1:
        return [array]
    expected = sum(sizes)
    if array.ndim == 0 or array.shape[0] != expected:
        raise TritonError.internal(
            f"batched output has shape {list(array.shape)}; expected first dimension {expected}"
        )
    views: list[np.ndarray[Any, Any]] = []
    start = 0
    for n in sizes:
        views.append(array[start : start + n])
        start += n
    return views


def scatter_responses(
    requests: Sequence[InferenceRequest],
    arrays: Mapping[str, np.ndarray[Any, Any]],
    datatypes: Mapping[str, DataType],
) -> list[InferenceResponse]:
    """One response per request from the batch's output ``arrays`` (by output name):
    each holds views of that request's rows (``scatter_output``), typed by ``datatypes``."""
    if len(requests) == 1:
        return [InferenceResponse({n: Tensor(n, a, datatypes[n]) for n, a in arrays.items()})]
    sizes = batch_sizes(requests)
    parts = {name: scatter_output(array, sizes) for name, array in arrays.items()}
    return [
        InferenceResponse({n: Tensor(n, p[i], datatypes[n]) for n, p in parts.items()})
        for i in range(len(requests))
    ]


def outputs_to_compute(requests: Sequence[InferenceRequest], names: Sequence[str]) -> list[str]:
    """Of the model's outputs ``names``, those some request of the batch asks for, in
    order; all of them when a request names none (it gets every output)."""
    if any(not r.requested_outputs for r in requests):
        return list(names)
    wanted = {o.name for r in requests for o in r.requested_outputs}
    return [n for n in names if n in wanted]
