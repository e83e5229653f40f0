"""uvicorn's private surface that the HTTP front end builds on (http/uvicorn_surface.py).

When a uvicorn release renames or drops one of these names, the first test
fails and says which; the pin in pyproject.toml keeps such a release from being
installed until it has been checked."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from tritonpy.http import uvicorn_surface

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_uvicorn_has_every_private_name_tritonpy_uses() -> None:
    missing = uvicorn_surface.problems()
    assert not missing, (
        f"uvicorn {metadata.version('uvicorn')} changed what tritonpy's HTTP front end builds on:\n  "
        + "\n  ".join(missing)
    )


def test_the_pin_in_pyproject_is_the_checked_range_and_holds_the_installed_uvicorn() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in dependencies if re.match(r"uvicorn\b", d)]
    low, high = uvicorn_surface.TESTED
    assert pin.replace(" ", "") == f"uvicorn>={low[0]}.{low[1]},<{high[0]}.{high[1]}"
    assert uvicorn_surface.tested(), f"uvicorn {metadata.version('uvicorn')} is outside {pin}"


def test_a_missing_method_or_attribute_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    cycle = "uvicorn.protocols.http.httptools_impl:RequestResponseCycle"
    protocol = "uvicorn.protocols.http.h11_impl:H11Protocol"
    monkeypatch.setitem(uvicorn_surface.ATTRIBUTES, cycle, ("scope", "renamed_field"))
    monkeypatch.setitem(uvicorn_surface.METHODS, protocol, ("handle_events", "_renamed_method"))
    monkeypatch.setitem(uvicorn_surface.METHODS, "uvicorn.protocols.http.gone:Gone", ("x",))
    assert sorted(uvicorn_surface.problems()) == sorted(
        [
            f"{cycle} no longer sets self.renamed_field",
            f"{protocol}._renamed_method() is gone",
            "uvicorn.protocols.http.gone:Gone is gone",
        ]
    )


def test_an_untested_uvicorn_is_refused_only_when_its_surface_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(uvicorn_surface, "TESTED", ((0, 0), (0, 1)))
    uvicorn_surface.check()  # untested, but everything is there: served
    monkeypatch.setitem(uvicorn_surface.METHODS, "uvicorn.server:Server", ("capture_signals", "_gone"))
    with pytest.raises(RuntimeError, match=r"uvicorn .* is not supported: .*>=0\.0,<0\.1.*_gone\(\) is gone"):
        uvicorn_surface.check()
