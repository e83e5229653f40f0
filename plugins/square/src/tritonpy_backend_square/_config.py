"""The model config as Triton's square backend reads it: one INT32 ``IN`` [1], one INT32 ``OUT`` [1],
and the parameters that make its responses slow, failed or empty.

Checked once per model version, in ``model_initialize``, with the rules, the
order and the words of Triton's ``square.cc`` (``ValidateModelConfig``), each
failure INVALID_ARG: one input and one output; named ``IN`` and ``OUT``; each
of ``dims`` ``[1]`` (never ``reshape``); each ``TYPE_INT32``. Nothing else:
``max_batch_size`` may be above 0 (each request must then be of batch 1), the
model need not be decoupled.

The parameters (square.cc's ``ModelParameters``) are read before those checks,
as square.cc reads them when it makes its model state: ``CUSTOM_INFER_DELAY_NS``,
``CUSTOM_OUTPUT_DELAY_NS``, ``CUSTOM_CANCEL_DELAY_NS``, ``CUSTOM_FAIL_COUNT``,
``CUSTOM_EMPTY_COUNT``, each a string of decimal digits; any other value is
logged (``<value> string_value from <key> parameter is not a number``) and the
parameter keeps its default, 0.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import TritonError

#: ``std::stoi``'s largest value: square.cc reads each parameter with it.
_INT_MAX = 2**31 - 1
_DIGITS = frozenset("0123456789")


class Result(enum.Enum):
    """What the ``index``-th of a request's responses is (square.cc's ``InferResultType``)."""

    SUCCESS = "success"
    FAIL = "fail"
    EMPTY = "empty"


@dataclass(frozen=True, slots=True)
class Parameters:
    """square.cc's ``ModelParameters``: delays in nanoseconds, and how many of a request's
    last responses fail (``fail_count``) or are left out (``empty_count``)."""

    infer_delay_ns: int = 0
    output_delay_ns: int = 0
    cancel_delay_ns: int = 0
    fail_count: int = 0
    empty_count: int = 0

    def result(self, index: int, count: int) -> Result:
        """Of ``count`` responses, the first ones succeed, the ``fail_count`` before the
        last ``empty_count`` fail, the last ``empty_count`` are empty (not sent)."""
        if index + self.fail_count + self.empty_count < count:
            return Result.SUCCESS
        if index + self.empty_count < count:
            return Result.FAIL
        return Result.EMPTY


#: Each parameter's key and its field of ``Parameters``, in square.cc's reading order.
PARAMETERS = (
    ("CUSTOM_INFER_DELAY_NS", "infer_delay_ns"),
    ("CUSTOM_OUTPUT_DELAY_NS", "output_delay_ns"),
    ("CUSTOM_CANCEL_DELAY_NS", "cancel_delay_ns"),
    ("CUSTOM_FAIL_COUNT", "fail_count"),
    ("CUSTOM_EMPTY_COUNT", "empty_count"),
)


def read_parameters(config: dict[str, Any], logger: logging.Logger) -> Parameters:
    """The parameters of ``config`` as square.cc reads them.

    A value of decimal digits only is read with ``std::stoi``'s range; anything else
    is logged and left at 0. Where square.cc's ``std::stoi`` throws (an empty value, a
    number above 2^31 - 1) and takes Triton's server down, the load fails with
    INVALID_ARG naming the parameter instead.
    """
    params: dict[str, Any] = dict(config.get("parameters") or {})
    values: dict[str, int] = {}
    for key, field in PARAMETERS:
        if key not in params:
            continue
        entry = params[key]
        if not isinstance(entry, dict) or "string_value" not in entry:
            logger.info("string_value cannot be parsed from %s parameter", key)
            continue
        raw = str(entry["string_value"])
        if not set(raw) <= _DIGITS:
            logger.info("%s string_value from %s parameter is not a number", raw, key)
            continue
        if not raw or int(raw) > _INT_MAX:
            raise TritonError.invalid_arg(
                f"parameter '{key}' must be a number from 0 to {_INT_MAX}, got '{raw}'"
            )
        values[field] = int(raw)
    return Parameters(**values)


def shape_to_string(shape: Sequence[int]) -> str:
    """A shape as Triton's ``backend::ShapeToString`` writes it: ``[1,2]``, no spaces."""
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def validate(config: dict[str, Any]) -> None:
    """Raise INVALID_ARG, in square.cc's words, for the first rule ``config`` breaks."""
    inputs: list[dict[str, Any]] = list(config.get("input") or [])
    outputs: list[dict[str, Any]] = list(config.get("output") or [])
    if len(inputs) != 1:
        raise TritonError.invalid_arg(f"expected 1 input, got {len(inputs)}")
    if len(outputs) != 1:
        raise TritonError.invalid_arg(f"expected 1 output, got {len(outputs)}")
    tensors = {"IN": inputs[0], "OUT": outputs[0]}
    for name, kind in (("IN", "input"), ("OUT", "output")):
        got = str(tensors[name].get("name", ""))
        if got != name:
            raise TritonError.invalid_arg(f"expected first {kind} tensor name to be {name}, got {got}")
    for name in ("IN", "OUT"):
        shape = [int(d) for d in tensors[name].get("dims") or []]
        if shape != [1]:
            raise TritonError.invalid_arg(f"expected {name} shape to be [1], got {shape_to_string(shape)}")
    for name in ("IN", "OUT"):
        got = str(tensors[name].get("data_type", ""))
        if got != "TYPE_INT32":
            raise TritonError.invalid_arg(f"expected {name} datatype to be INT32, got {got}")
