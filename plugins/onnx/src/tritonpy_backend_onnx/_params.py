"""Model parameter values (``parameters { key: ... value { string_value: ... } }``) as numbers
and switches, with a message naming the parameter when a value is not one."""

from __future__ import annotations

from collections.abc import Mapping

from tritonpy_sdk import TritonError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def int_param(params: Mapping[str, str], key: str) -> int | None:
    """``params[key]`` as an integer; None when absent or empty."""
    value = params.get(key)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise TritonError.invalid_arg(f"model parameter '{key}' must be an integer, got '{value}'") from None


def bool_param(params: Mapping[str, str], key: str) -> bool | None:
    """``params[key]`` as a switch (1/0, true/false, yes/no, on/off); None when absent or empty."""
    value = params.get(key)
    if value is None or value == "":
        return None
    parsed = parse_bool(value)
    if parsed is None:
        raise TritonError.invalid_arg(f"model parameter '{key}' must be true or false, got '{value}'")
    return parsed


def parse_bool(value: str) -> bool | None:
    """A switch's value, any case; None when ``value`` is not one."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return None
