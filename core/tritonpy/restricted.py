"""Restricted APIs: API groups that answer only requests carrying a header.

``--http-restricted-api <api>[,<api>...]:<key>=<value>`` and
``--grpc-restricted-protocol`` (same form) name groups of endpoints, as
Triton groups them; a request to a restricted group without header ``<key>``
set to ``<value>`` is refused (HTTP 403, gRPC UNAVAILABLE, Triton's words).
Over gRPC the metadata key is ``triton-grpc-protocol-<key>``. Each protocol
maps its own endpoints onto the groups (``http/restricted.py``,
``grpc/restricted.py``); the parsing and the group names live here once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tritonpy_sdk import TritonError

#: Triton's API groups.
GROUPS = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)

#: The prefix Triton puts before a restricted key in gRPC metadata.
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"


@dataclass(frozen=True, slots=True)
class Requirement:
    """The header and value a restricted group needs (header names compare
    without regard to case, values exactly)."""

    key: str
    value: str

    def met_by(self, headers: Iterable[tuple[str, str]]) -> bool:
        """Whether ``(name, value)`` pairs (names in lower case) carry the header."""
        key = self.key.lower()
        return any(name == key and value == self.value for name, value in headers)


def parse_restrictions(flag: str, values: Iterable[str]) -> dict[str, Requirement]:
    """``{group: Requirement}`` from the flag's values; TritonError INVALID_ARG with
    tritonserver's message for a malformed value, an unknown group, or a group
    named in two values."""
    groups: dict[str, Requirement] = {}
    for text in values:
        apis, colon, setting = text.partition(":")
        key, equals, value = setting.partition("=")
        if not colon or not equals or not apis or not key or not value:
            raise TritonError.invalid_arg(
                f"{flag} option format is '<config name>:<setting>=<value>'. Got {text}"
            )
        for api in apis.split(","):
            if api not in GROUPS:
                raise TritonError.invalid_arg(f"unknown restricted api '{api}'")
            if api in groups:
                raise TritonError.invalid_arg(
                    f"restricted api '{api}' can not be specified in multiple config groups"
                )
            groups[api] = Requirement(key, value)
    return groups
