"""The suite turns warnings into errors; the few it ignores (pyproject's filterwarnings)
are third-party warnings about their own code, each ignored only where it comes from."""

from __future__ import annotations

import warnings

import pytest

#: What setuptools 80-81 says on ``import pkg_resources`` (``warnings.warn(..., UserWarning,
#: stacklevel=2)`` in ``pkg_resources/__init__.py``): attributed to the importing module.
PKG_RESOURCES = (
    "pkg_resources is deprecated as an API. See https://setuptools.pypa.io/en/latest/pkg_resources.html. "
    "The pkg_resources package is slated for removal as early as 2025-11-30. Refrain from using this "
    "package or pin to Setuptools<81."
)


def _warn_from(module: str) -> None:
    warnings.warn_explicit(
        PKG_RESOURCES, UserWarning, f"{module.replace('.', '/')}/__init__.py", 45, module=module
    )


def test_tritonclients_cuda_shared_memory_may_import_pkg_resources() -> None:
    """tritonclient up to 2.71 imports pkg_resources in ``tritonclient.utils.cuda_shared_memory``
    (the CUDA shared-memory tests and NVIDIA's cudashm clients use it): on a host with a
    setuptools that warns, that import must not fail the test importing it."""
    _warn_from("tritonclient.utils.cuda_shared_memory")


def test_pkg_resources_from_anywhere_else_is_still_an_error() -> None:
    with pytest.raises(UserWarning, match="pkg_resources is deprecated"):
        _warn_from("tritonpy.something")
