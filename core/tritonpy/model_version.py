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


def parse_version(version: int | str | None, model: str | None = None) -> int:
    """A model version as HTTP, gRPC, the in-process API and the repository give it:
    -1 (the latest) when absent or empty, else its number; TritonError otherwise.

    A protocol's field (no ``model``) is ASCII digits (``is_version``), as Triton's
    front ends take it. A lookup of ``model`` (``ModelManager.get_version``) also
    takes an int as it is and the in-process API's "-1" for the latest.
    """
    if isinstance(version, int):
        return version
    if not version:
        return -1
    if version.isascii() and version.isdigit():  # is_version, inline: most requests pass here
        return int(version)
    if model is None:
        # Triton's words for a protocol's version field that is not a number.
        raise TritonError.invalid_arg(
            f"failed to get model version from specified version string '{version}': it must be an integer"
        )
    if version.startswith("-") and is_version(version[1:]):
        return int(version)
    raise TritonError.invalid_arg(
        f"failed to parse version '{version}' of model '{model}': it must be an integer"
    )
