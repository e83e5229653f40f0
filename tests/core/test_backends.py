"""Backend discovery through real entry-point metadata on sys.path."""

import sys
from pathlib import Path

import pytest
from tritonpy.runtime.backends import KNOWN_PACKAGES, BackendRegistry
from tritonpy_sdk import TritonError

GOOD = """
from tritonpy_sdk import BackendInfo, InferenceResponse, hookimpl

@hookimpl
def backend_info():
    return BackendInfo(platforms=("good_platform",), default_model_filename="model.good")

@hookimpl
def execute(instance, requests):
    return [InferenceResponse() for _ in requests]
"""


def test_listing_imports_nothing(install_backend) -> None:  # type: ignore[no-untyped-def]
    install_backend("goodbk", dist="tp-test-good", version="1.2.3", code=GOOD)
    registry = BackendRegistry()
    entry = next(e for e in registry.entries() if e.name == "goodbk")
    assert (entry.distribution, entry.version) == ("tp-test-good", "1.2.3")
    assert "tp_test_goodbk" not in sys.modules
    assert registry.hooks("goodbk").info.default_model_filename == "model.good"
    assert "tp_test_goodbk" in sys.modules


def test_broken_plugins_are_reported_and_do_not_stop_others(install_backend) -> None:  # type: ignore[no-untyped-def]
    install_backend("goodbk", dist="tp-test-good", version="1.0", code=GOOD)
    install_backend("crashbk", dist="tp-test-crash", version="0.1", code="raise RuntimeError('boom')\n")
    install_backend(
        "sigbk",
        dist="tp-test-sig",
        version="0.2",
        code=GOOD.replace("def execute(instance, requests):", "def execute(instance, requests, oops):"),
    )
    registry = BackendRegistry()
    with pytest.raises(TritonError) as crash:
        registry.hooks("crashbk")
    assert "tp-test-crash 0.1" in crash.value.message
    assert "RuntimeError: boom" in crash.value.message
    with pytest.raises(TritonError) as sig:
        registry.hooks("sigbk")
    assert "backend 'sigbk'" in sig.value.message and "oops" in sig.value.message
    assert "tp-test-sig 0.2" in sig.value.message
    # reported once: the second look-up gives the same stored reason
    with pytest.raises(TritonError) as again:
        registry.hooks("sigbk")
    assert again.value.message == sig.value.message
    assert registry.hooks("goodbk").name == "goodbk"
    assert registry.backend_for_platform("good_platform") == "goodbk"


def test_missing_backend_names_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every backend tritonpy ships is installed in the test environment: name one more.
    monkeypatch.setitem(KNOWN_PACKAGES, "notshipped", "tritonpy-backend-notshipped")
    registry = BackendRegistry()
    with pytest.raises(TritonError, match="install the package 'tritonpy-backend-notshipped'"):
        registry.hooks("notshipped")


def test_backend_for_files(install_backend, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    install_backend("goodbk", dist="tp-test-good", version="1.0", code=GOOD)
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    registry = BackendRegistry()
    assert registry.backend_for_files([version]) is None
    (version / "model.good").write_text("")
    assert registry.backend_for_files([version]) == "goodbk"


def test_two_backends_claiming_one_default_file_are_refused_by_name(
    install_backend,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    install_backend("goodbk", dist="tp-test-good", version="1.0", code=GOOD)
    install_backend("rivalbk", dist="tp-test-rival", version="2.0", code=GOOD)
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "model.good").write_text("")
    registry = BackendRegistry()
    with pytest.raises(TritonError) as exc:
        registry.backend_for_files([version])
    message = exc.value.message
    assert "model 'm'" in message
    assert "'goodbk' (model.good, from tp-test-good 1.0)" in message
    assert "'rivalbk' (model.good, from tp-test-rival 2.0)" in message
    assert "set 'backend' in its config.pbtxt" in message
