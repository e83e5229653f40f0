"""The backend author's namespace holds what a backend needs; host and cache-plugin names live
in ``tritonpy_sdk.host`` and ``tritonpy_sdk.cache``, and their old places warn."""

from __future__ import annotations

import importlib
import inspect

import pytest
import tritonpy_sdk
from tritonpy_sdk import cache, host

MOVED = {
    "ENTRY_POINT_GROUP": host,
    "PROJECT_NAME": host,
    "hookspec": host,
    "MetricRegistry": host,
    "CACHE_ENTRY_POINT_GROUP": cache,
    "CacheFactory": cache,
    "ResponseCache": cache,
}


def test_host_and_cache_names_are_not_in_the_backend_namespace() -> None:
    assert not set(MOVED) & set(tritonpy_sdk.__all__)
    for name, module in MOVED.items():
        assert name in module.__all__


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_still_resolves_with_a_warning_naming_its_place(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"tritonpy_sdk\.{name} moved to {MOVED[name].__name__}"):
        value = getattr(tritonpy_sdk, name)
    assert value is getattr(MOVED[name], name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        importlib.import_module("tritonpy_sdk").Nope  # noqa: B018


def test_every_public_class_and_function_has_a_docstring() -> None:
    for module in (tritonpy_sdk, host, cache):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert value.__doc__, f"{module.__name__}.{name}"
