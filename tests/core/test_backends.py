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


@pytest.fixture
def shipped_not_installed(monkeypatch: pytest.MonkeyPatch) -> str:
    """A backend tritonpy ships (in its own folder under plugins/) that is not installed: the
    development environment installs every real one."""
    monkeypatch.setitem(KNOWN_PACKAGES, "nosuch", "tritonpy-backend-nosuch")
    return "nosuch"


def test_missing_backend_names_its_package(shipped_not_installed: str) -> None:
    registry = BackendRegistry()
    with pytest.raises(TritonError, match="install the package 'tritonpy-backend-nosuch'"):
        registry.hooks(shipped_not_installed)


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


def test_missing_backend_says_how_to_install_it_while_not_on_pypi(shipped_not_installed: str) -> None:
    with pytest.raises(TritonError) as missing:
        BackendRegistry().hooks(shipped_not_installed)
    assert "pip install ./plugins/nosuch from a clone of tritonpy" in missing.value.message
    assert "pip install --find-links DIR tritonpy-backend-nosuch" in missing.value.message
    assert "./dev wheels DIR" in missing.value.message


def test_misspelled_backend_lists_the_installed_ones_and_the_closest_name(
    install_backend,  # type: ignore[no-untyped-def]
    shipped_not_installed: str,
) -> None:
    install_backend("goodbk", dist="tp-test-good", version="1.0", code=GOOD)
    registry = BackendRegistry()
    with pytest.raises(TritonError) as typo:
        registry.hooks("goodbck")
    assert "backend 'goodbck' is not installed; installed backends: " in typo.value.message
    assert "goodbk" in typo.value.message.split("installed backends: ")[1]
    assert typo.value.message.endswith("did you mean 'goodbk'?")
    # the closest name may be a backend tritonpy ships that is not installed: how to install it
    with pytest.raises(TritonError) as shipped:
        registry.hooks("nosuhc")
    assert "did you mean 'nosuch'? (install the package 'tritonpy-backend-nosuch'" in shipped.value.message
    with pytest.raises(TritonError) as unrelated:
        registry.hooks("zzzz")
    assert "did you mean" not in unrelated.value.message
