"""``--http-header-forward-pattern`` / ``--grpc-header-forward-pattern``: request headers
whose name matches a regular expression reach the model as string request parameters,
as Triton forwards them.

The pattern is searched for in the name (Triton's RE2 partial match), ignoring case
unless it starts with ``(?-i)``. Header names arrive lowercase (HTTP/2 makes them so;
tritonpy's HTTP/1.1 server does too). A header the pattern finds that is named like one
of Triton's reserved parameters (``sequence_id``, ``priority``, ``timeout``, ... or
``triton_*``) would steer the request: the request is refused with INVALID_ARG, in
Triton's words, as Triton does since 26.05.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, MutableMapping

from tritonpy_sdk import ParameterValue, TritonError

#: Request parameters Triton reserves for itself (its parameters extension), besides
#: every name that starts with ``triton_``.
RESERVED = frozenset(
    {
        "sequence_id",
        "sequence_start",
        "sequence_end",
        "priority",
        "timeout",
        "headers",
        "binary_data_output",
    }
)


def header_pattern(pattern: str, flag: str) -> re.Pattern[str] | None:
    """The compiled forwarding pattern of ``flag`` (None when not set); a pattern that
    does not compile is INVALID_ARG naming the flag."""
    if not pattern:
        return None
    text, ignore_case = pattern, True
    if text.startswith("(?-i)"):  # RE2's way to turn the case back on; Python's re has none
        text, ignore_case = text[5:], False
    try:
        return re.compile(text, re.IGNORECASE) if ignore_case else re.compile(text)
    except re.error as exc:
        raise TritonError.invalid_arg(f"{flag} '{pattern}' is not a regular expression: {exc}") from None


def forward_headers(
    pattern: re.Pattern[str],
    headers: Iterable[tuple[str, str]],
    parameters: MutableMapping[str, ParameterValue],
) -> None:
    """Add each of ``headers`` whose name ``pattern`` finds to ``parameters`` (a header
    wins over a parameter of its name, as it comes last in Triton's list); one with a
    reserved name is INVALID_ARG."""
    for name, value in headers:
        if pattern.search(name):
            if name in RESERVED or name.startswith("triton_"):
                raise TritonError.invalid_arg(
                    f"Header '{name}' is reserved for Triton usage and cannot be forwarded."
                )
            parameters[name] = value
