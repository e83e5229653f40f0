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


#: What google-api-core (imported by google-cloud-storage, for gs:// repositories) says when
#: grpcio is installed without grpcio-status (``warnings.warn(..., ImportWarning)``, stacklevel 1).
GRPCIO_STATUS = "Please install grpcio-status to obtain helpful grpc error messages."


def test_google_api_core_may_ask_for_grpcio_status() -> None:
    warnings.warn_explicit(
        GRPCIO_STATUS, ImportWarning, "google/api_core/exceptions.py", 32, module="google.api_core.exceptions"
    )


def test_asking_for_grpcio_status_from_anywhere_else_is_still_an_error() -> None:
    with pytest.raises(ImportWarning, match="grpcio-status"):
        warnings.warn_explicit(GRPCIO_STATUS, ImportWarning, "tritonpy/x.py", 1, module="tritonpy.x")
