"""The model config as Triton's identity backend reads it: INPUT<i>/OUTPUT<i> pairs and parameters.

Checked once per model version, in ``model_initialize``, with the rules and the
words of Triton's ``identity.cc`` (``ValidateModelConfig``): as many outputs as
inputs; inputs named ``INPUT<i>`` and outputs ``OUTPUT<i>``; each output's
input there, of the same data type and shape (``reshape.shape`` where given,
else ``dims``). A config that breaks a rule fails the load with INVALID_ARG.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import DataType, TritonError

INPUT_PREFIX = "INPUT"
OUTPUT_PREFIX = "OUTPUT"

#: What ``std::stoi`` reads of a string: leading spaces, a sign, digits (the rest is ignored).
_STOI = re.compile(r"\s*([+-]?\d+)")


@dataclass(frozen=True, slots=True)
class OptionalInput:
    """An input marked ``optional: true``: what its output is when a request leaves it out
    (zeros of ``datatype`` and ``shape``, the config's shape with -1 read as 1)."""

    datatype: DataType
    shape: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Settings:
    """What a model version's config says, checked.

    ``outputs``: the config's output names (what a request naming none gets).
    ``optional``: per index suffix (``"0"`` for ``INPUT0``), the optional inputs.
    ``execute_delay_ms`` and ``delay_multiplier``: the sleep of each execution
    (``instance_wise_delay_multiplier`` scales it by the instance's index).
    ``creation_delay_sec``: the sleep of ``model_initialize``.
    ``custom_tracing``, ``nested_span_count``, ``single_activity_frequency``: the custom
    trace activities each traced request gets (identity.cc's ``enable_custom_tracing``).
    """

    outputs: tuple[str, ...]
    optional: dict[str, OptionalInput]
    execute_delay_ms: int = 0
    delay_multiplier: int = 0
    creation_delay_sec: int = 0
    custom_tracing: bool = False
    nested_span_count: int = 0
    single_activity_frequency: int = 1

    def delay_ms(self, instance_index: int) -> int:
        """The sleep of one execution on the instance of ``instance_index`` (identity.cc's
        ``ExecDelay() * max(multiplier, 1)``, the multiplier times the index when set)."""
        if self.execute_delay_ms <= 0:
            return 0
        multiplier = self.delay_multiplier * instance_index if self.delay_multiplier > 0 else 0
        return self.execute_delay_ms * max(multiplier, 1)


def _shape(entry: dict[str, Any]) -> list[int]:
    reshape = entry.get("reshape")
    if reshape is not None:
        return [int(d) for d in reshape.get("shape", [])]
    return [int(d) for d in entry.get("dims", [])]


def shape_to_string(shape: list[int] | tuple[int, ...]) -> str:
    """A shape as Triton's ``backend::ShapeToString`` writes it: ``[1,2]``, no spaces."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def read_settings(config: dict[str, Any]) -> Settings:
    """The settings of a model config; INVALID_ARG in Triton's words for a config that
    breaks a rule of the identity backend, or for a parameter that is not an integer."""
    inputs: list[dict[str, Any]] = list(config.get("input") or [])
    outputs: list[dict[str, Any]] = list(config.get("output") or [])
    if len(inputs) != len(outputs):
        raise TritonError.invalid_arg("model configuration must have equal input/output pairs")
    input_infos: dict[str, tuple[str, list[int]]] = {}
    output_infos: dict[str, tuple[str, list[int]]] = {}
    optional: dict[str, OptionalInput] = {}
    for inp, out in zip(inputs, outputs):
        in_name, out_name = str(inp.get("name", "")), str(out.get("name", ""))
        if not in_name.startswith(INPUT_PREFIX):
            raise TritonError.invalid_arg(
                f"expected input name to follow INPUT<index> pattern, got '{in_name}'"
            )
        if not out_name.startswith(OUTPUT_PREFIX):
            raise TritonError.invalid_arg(
                f"expected output name to follow OUTPUT<index> pattern, got '{out_name}'"
            )
        in_type, out_type = str(inp.get("data_type", "")), str(out.get("data_type", ""))
        in_shape, out_shape = _shape(inp), _shape(out)
        suffix = in_name[len(INPUT_PREFIX) :]
        # The first of a duplicated index counts, as in identity.cc's std::map::insert.
        input_infos.setdefault(suffix, (in_type, in_shape))
        output_infos.setdefault(out_name[len(OUTPUT_PREFIX) :], (out_type, out_shape))
        if inp.get("optional", False):
            optional[suffix] = OptionalInput(
                DataType.from_config(in_type), tuple(1 if d == -1 else d for d in in_shape)
            )
    for index in sorted(output_infos):  # identity.cc walks a std::map: in index order
        out_type, out_shape = output_infos[index]
        found = input_infos.get(index)
        if found is None:
            raise TritonError.invalid_arg("expected input and output indices to match")
        in_type, in_shape = found
        if in_type != out_type:
            raise TritonError.invalid_arg(
                f"expected input and output datatype to match, got {in_type} and {out_type}"
            )
        if in_shape != out_shape:
            raise TritonError.invalid_arg(
                "expected input and output shape to match, got "
                f"{shape_to_string(in_shape)} and {shape_to_string(out_shape)}"
            )
    params = _parameters(config)
    execute_delay_ms = delay_multiplier = 0
    if "execute_delay_ms" in params:
        execute_delay_ms = _int_parameter(params, "execute_delay_ms")
        # Read only beside execute_delay_ms, as identity.cc does.
        if "instance_wise_delay_multiplier" in params:
            delay_multiplier = _int_parameter(params, "instance_wise_delay_multiplier")
    creation_delay_sec = 0
    if "creation_delay_sec" in params:
        # A negative creation delay sleeps no time in identity.cc (sleep_for returns at once).
        creation_delay_sec = max(_int_parameter(params, "creation_delay_sec", negative_ok=True), 0)
    # Custom tracing, read as identity.cc reads it: the span count only beside the switch,
    # the frequency only beside the span count.
    custom_tracing = params.get("enable_custom_tracing") == "true"
    nested = frequency = 0
    if "enable_custom_tracing" in params and "nested_span_count" in params:
        nested = _int_parameter(params, "nested_span_count")
        if "single_activity_frequency" in params:
            frequency = _int_parameter(params, "single_activity_frequency")
            if frequency == 0 and nested > 0:  # identity.cc divides by it
                raise TritonError.invalid_arg(
                    "parameter 'single_activity_frequency' must be 1 or more, got '0'"
                )
    return Settings(
        outputs=tuple(str(o.get("name", "")) for o in outputs),
        optional=optional,
        execute_delay_ms=execute_delay_ms,
        delay_multiplier=delay_multiplier,
        creation_delay_sec=creation_delay_sec,
        custom_tracing=custom_tracing,
        nested_span_count=nested,
        single_activity_frequency=frequency or 1,
    )


def _parameters(config: dict[str, Any]) -> dict[str, str]:
    params = config.get("parameters") or {}
    return {str(k): str((v or {}).get("string_value", "")) for k, v in params.items()}


def _int_parameter(params: dict[str, str], key: str, negative_ok: bool = False) -> int:
    """An integer parameter read as ``std::stoi`` reads it (``"10"``, ``" 10ms"``): INVALID_ARG
    naming the parameter where identity.cc would throw, and for a negative value unless
    ``negative_ok`` (identity.cc reads a negative delay or multiplier as an unsigned
    number: a delay of centuries)."""
    raw = params[key]
    match = _STOI.match(raw)
    if match is None:
        raise TritonError.invalid_arg(f"parameter '{key}' must be an integer, got '{raw}'")
    value = int(match.group(1))
    if value < 0 and not negative_ok:
        raise TritonError.invalid_arg(f"parameter '{key}' must be 0 or more, got '{raw}'")
    return value
