"""The in-process API's inputs: the Python values a caller passes, as SDK tensors.

``ModelHandle.create_request`` (and ``predict``, ``infer``) take numpy arrays and
what numpy reads as one (lists, numbers, ``str``/``bytes``, objects with
``__array__`` or ``__dlpack__``); ``input_tensor`` turns each into a ``Tensor``.
The network front ends decode their own wire formats (``codec``) instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from tritonpy_sdk import DataType, Tensor, TritonError

#: Numeric numpy dtype → its data type, as ``DataType.from_numpy`` maps it.
NUMERIC = {
    dtype: DataType.from_numpy(dtype)
    for dtype in (d.numpy_dtype for d in DataType if d is not DataType.BYTES)
    if dtype.kind not in "OSU"
}


def input_tensor(
    model: str, name: str, value: Any, declared: Callable[[str], DataType | None] = lambda name: None
) -> Tensor:
    """The tensor of input ``name`` given to the in-process API.

    Taken: a numpy array or scalar; a list or tuple of numbers, or of ``str`` /
    ``bytes`` (a BYTES tensor); a Python number, ``str`` or ``bytes``; an SDK
    ``Tensor``; an object numpy converts itself (``__array__``: a CPU torch tensor,
    a pandas column) or through DLPack (``__dlpack__``). Anything else would become
    a one-element object array, read as BYTES, so it is refused with a
    TritonError (INVALID_ARG) naming the input and what was given.

    Python numbers (a list, a tuple, a number) carry no data type of their own:
    they take the model's (``declared(name)``, asked only then), so ``[1, 2]`` fits an
    INT32 input. Arrays keep theirs, and a mismatch is refused by validation.
    """
    if type(value) is np.ndarray:
        # The common case, without ``from_numpy``'s conversions: a plain numeric array is
        # taken as it is (``np.asarray`` would return it unchanged; only BYTES arrays and
        # ndarray subclasses get converted, and those go the long way below).
        datatype = NUMERIC.get(value.dtype)
        if datatype is not None:
            return Tensor(name, value, datatype)
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return Tensor.from_numpy(name, value)
    if isinstance(value, (list, tuple)):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged nesting
            raise _not_an_array(model, name, value, " whose rows differ in length") from None
        if array.dtype == object and not all(isinstance(x, (str, bytes)) for x in array.flat):
            why = ": its elements are neither all numbers nor all str/bytes"
            raise _not_an_array(model, name, value, why)
        return _python_numbers(model, name, value, array, declared)
    if isinstance(value, (np.generic, str, bytes)):  # before the numbers: np.float64 is a float
        return Tensor.from_numpy(name, np.asarray(value))
    if isinstance(value, (bool, int, float)):
        return _python_numbers(model, name, value, np.asarray(value), declared)
    if hasattr(value, "__array__"):
        return Tensor.from_numpy(name, np.asarray(value))
    if hasattr(value, "__dlpack__"):
        return Tensor.from_numpy(name, np.from_dlpack(value))
    raise _not_an_array(model, name, value, "")


def _python_numbers(
    model: str, name: str, value: Any, array: np.ndarray[Any, Any], declared: Callable[[str], DataType | None]
) -> Tensor:
    """``array`` (numpy's reading of ``value``) in the model's data type for the input
    when ``value`` held Python numbers and the model declares a numeric type."""
    if array.dtype.kind not in "biuf":  # strings: BYTES, as numpy read them
        return Tensor.from_numpy(name, array)
    datatype = declared(name)
    if datatype is None or datatype is DataType.BYTES:
        return Tensor.from_numpy(name, array)
    target = datatype.numpy_dtype
    if array.dtype.kind == "f" and target.kind in "biu":
        return Tensor.from_numpy(name, array)  # not silently truncated: validation names the type
    try:
        converted = np.asarray(value, dtype=target)
    except (OverflowError, ValueError):
        # Out of the declared type's range: refused by validation with both types named.
        return Tensor.from_numpy(name, array)
    return Tensor(name, converted, datatype)


def _not_an_array(model: str, name: str, value: Any, why: str) -> TritonError:
    kind = type(value)
    given = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    hint = ""
    if kind.__name__ in ("InferInput", "InferRequestedOutput"):
        hint = "; tritonclient's InferInput is for the network clients: pass the numpy array itself"
    return TritonError.invalid_arg(
        f"input '{name}' for model '{model}' must be a numpy array (or a list, a number, a str or "
        f"bytes, a Tensor), got {given}{why}{hint}"
    )
