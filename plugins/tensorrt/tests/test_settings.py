"""``--backend-config=tensorrt,...``: plugin libraries and version compatibility, read as
Triton's TensorRT backend reads them."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import pytest
from tritonpy_backend_tensorrt._settings import Settings, load_plugins
from tritonpy_sdk import Backend, TritonError


def test_settings_as_triton_reads_them() -> None:
    given = Backend("tensorrt", {"plugins": "/opt/a.so; /opt/b.so;", "version-compatible": "TRUE"})
    assert Settings.from_backend(given) == Settings(("/opt/a.so", "/opt/b.so"), True)
    assert Settings.from_backend(Backend("tensorrt", {})) == Settings((), False)
    with pytest.raises(TritonError) as err:
        Settings.from_backend(Backend("tensorrt", {"version-compatible": "maybe"}))
    assert err.value.code.name == "INVALID_ARG"
    assert str(err.value) == "backend setting 'version-compatible' must be true or false, got 'maybe'"


def test_plugin_libraries_load_and_one_missing_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build a library")
    source = tmp_path / "plugin.c"
    source.write_text("int tritonpy_test_plugin(void) { return 7; }\n")
    library = tmp_path / "libplugin.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    missing = tmp_path / "missing.so"
    with caplog.at_level(logging.INFO, logger="tritonpy"):
        loaded = load_plugins([str(library), str(missing)])
    assert len(loaded) == 1 and loaded[0].tritonpy_test_plugin() == 7
    said = [r.getMessage() for r in caplog.records if r.name == "tritonpy.backend.tensorrt"]
    assert any(m.startswith(f"unable to load TensorRT plugin library '{missing}'") for m in said), said
    assert f"loaded TensorRT plugin library '{library}'" in said
