"""Fixtures shared by the core's tests."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Test helper modules beside this file (tritonpy_testbackend) import by name.
sys.path.insert(0, str(Path(__file__).parent))

from tritonpy_testbackend import write_repos  # noqa: E402

#: NVIDIA's test of Triton's in-process API is data here: a test of ours runs it in a
#: process of its own, with ``import tritonserver`` resolved to tritonpy.
collect_ignore = ["data/nvidia_examples/tritonserver_api/test_api.py"]

InstallBackend = Callable[..., None]


def write_backend_dist(site: Path, backend: str, code: str, dist: str = "", version: str = "0.1") -> None:
    """Lay out module ``tp_test_<backend>`` and its dist-info in ``site`` as pip would,
    with an entry point ``<backend> = tp_test_<backend>`` in ``tritonpy.backends``."""
    module = f"tp_test_{backend}"
    dist = dist or f"tp-test-{backend}"
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[tritonpy.backends]\n{backend} = {module}\n")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    """A directory on ``sys.path`` to install test backends into (see write_backend_dist)."""
    site = tmp_path / "site"
    site.mkdir()
    sys.path.insert(0, str(site))
    yield site
    sys.path.remove(str(site))
    for name in [m for m in sys.modules if m.startswith("tp_test_")]:
        del sys.modules[name]


@pytest.fixture
def install_backend(site: Path) -> InstallBackend:
    """``install_backend(name, code, dist="", version="0.1")`` into ``site``."""

    def install(backend: str, code: str, dist: str = "", version: str = "0.1") -> None:
        write_backend_dist(site, backend, code, dist=dist, version=version)

    return install


@pytest.fixture(scope="session")
def backend_dist() -> Callable[..., None]:
    """``write_backend_dist`` itself, for tests that lay out their own site folder."""
    return write_backend_dist


@pytest.fixture(scope="module")
def test_repos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two repository roots of models served by tritonpy_testbackend.TestBackend ("testbk")."""
    return write_repos(tmp_path_factory.mktemp("repos"))
