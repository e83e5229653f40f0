"""A model version as the protocols and the in-process API give it: a string or a number.

HTTP paths, gRPC's ``model_version`` fields, the in-process API and the
repository's own lookups spell a version differently; ``parse_version`` reads
them all into one number (-1: the latest), with Triton's messages for what is
not one. Shared by the front ends and ``repository.manager``; it imports
nothing of the server, so a front end reads versions without the model runtime.
"""

from __future__ import annotations

from tritonpy_sdk import TritonError


def is_version(text: str) -> bool:
    """Whether ``text`` is a version as Triton's front ends take it: ASCII digits only
    (``int`` would also read other scripts' digits, "+", spaces and underscores)."""
    return text.isascii() and text.isdigit()


#: The range of a C ``long`` (``std::stol``'s result), which Triton's front ends read a
#: version into.
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
#: What C's ``isspace`` skips before a number.
_SPACE = " \t\n\v\f\r"


def parse_version(version: int | str | None, model: str | None = None) -> int:
    """A model version as HTTP, gRPC, the in-process API and the repository give it:
    -1 (the latest) when absent or empty, else its number; TritonError otherwise.

    A protocol's field (no ``model``) is read as Triton's front ends read it, with
    ``std::stol`` (``protocol_version``): "0" is version 0 (a folder ``0/``). A
    lookup of ``model`` (``ModelManager.get_version``) takes an int as it is, and
    digits with the in-process API's "-1" for the latest.
    """
    if isinstance(version, int):
        return version
    if not version:
        return -1
    if version.isascii() and version.isdigit():  # is_version, inline: most requests pass here
        number = int(version)
        if number <= _LONG_MAX or model is not None:
            return number
    if model is None:
        return protocol_version(version)
    if version.startswith("-") and is_version(version[1:]):
        return int(version)
    raise TritonError.invalid_arg(
        f"failed to parse version '{version}' of model '{model}': it must be an integer"
    )


def protocol_version(text: str) -> int:
    """A version field as Triton 2.51's HTTP and gRPC front ends read it: C's ``std::stol``
    (white space, then a sign, then digits; what follows them is ignored), refused
    when it finds no number, when the number does not fit a ``long``, or when it is
    negative, in Triton's words."""
    rest = text.lstrip(_SPACE)
    sign = -1 if rest[:1] == "-" else 1
    if rest[:1] in ("+", "-"):
        rest = rest[1:]
    digits = len(rest) - len(rest.lstrip("0123456789"))
    number = sign * int(rest[:digits]) if digits else None
    if number is None or not _LONG_MIN <= number <= _LONG_MAX:
        raise TritonError.invalid_arg(
            f"failed to get model version from specified version string '{text}' (details: stol), "
            "version should be an integral value > 0"
        )
    if number < 0:
        raise TritonError.invalid_arg(
            f"invalid model version specified '{text}' , version should be an integral value > 0"
        )
    return number
