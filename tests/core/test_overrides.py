"""Load parameters: the config override, model files and where they may be written."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from tritonpy.repository._stamp import folder_stamp
from tritonpy.repository.overrides import check_file_name, parse_override, split_load_parameters
from tritonpy_sdk import ErrorCode, TritonError

CONFIG = json.dumps({"backend": "testbk", "max_batch_size": 4})


@pytest.mark.parametrize(
    "name",
    ["../evil.py", "1/../../evil.py", "/../etc/passwd", "1/..", "..", "", "1/", ".", "/", "a\x00b"],
)
def test_file_names_outside_the_model_folder_are_refused(name: str) -> None:
    with pytest.raises(TritonError) as raised:
        check_file_name("m", name)
    assert raised.value.code is ErrorCode.INVALID_ARG
    assert f"'file:{name}'" in raised.value.message


def test_file_names_inside_the_model_folder_are_taken() -> None:
    assert str(check_file_name("m", "1/model.onnx")) == "1/model.onnx"
    assert str(check_file_name("m", "./1//sub/./x.bin")) == "1/sub/x.bin"
    assert str(check_file_name("m", "labels.txt")) == "labels.txt"
    # As Triton joins them to the model folder: a leading "/" starts there (NVIDIA's
    # tests load "file:/1/model.py"), and ".." that stays inside is fine.
    assert str(check_file_name("m", "/1/model.py")) == "1/model.py"
    assert str(check_file_name("m", "//etc/passwd")) == "etc/passwd"
    assert str(check_file_name("m", "1/../2/model.py")) == "2/model.py"


def test_files_are_written_only_inside_a_private_folder(tmp_path: Path) -> None:
    override = parse_override(
        "m", CONFIG, {"1/model.txt": b"one", "1/sub/data.bin": b"\x00\x01", "l.txt": b"x"}
    )
    assert override is not None and override.folder is not None
    folder = override.folder
    try:
        assert folder.name == "m"
        assert (folder / "1" / "model.txt").read_bytes() == b"one"
        assert (folder / "1" / "sub" / "data.bin").read_bytes() == b"\x00\x01"
        assert (folder / "l.txt").read_bytes() == b"x"
        assert os.stat(folder.parent).st_mode & 0o077 == 0  # nobody else may read or plant links
        assert override.config.name == "m" and override.config.max_batch_size == 4
    finally:
        override.remove()
    assert not folder.parent.exists()
    override.remove()  # twice is fine


def test_a_refused_name_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(TritonError, match="a path that leaves the model folder"):
        parse_override("m", CONFIG, {"1/model.txt": b"ok", "../escape.txt": b"bad"})
    assert list(tmp_path.iterdir()) == []  # not even the private folder was made


def test_a_file_and_a_folder_of_the_same_name_are_refused() -> None:
    with pytest.raises(TritonError) as raised:
        parse_override("m", CONFIG, {"1": b"file", "1/model.txt": b"x"})
    assert raised.value.code is ErrorCode.INVALID_ARG


def test_an_unwritable_file_is_triton_s_poll_failure() -> None:
    """A path component longer than the file system allows: INTERNAL and Triton's words
    (NVIDIA's gRPC model control example checks both), and the server carries on."""
    with pytest.raises(TritonError) as raised:
        parse_override("m", "{}", {"A" * 256: b"a"})
    assert raised.value.code is ErrorCode.INTERNAL
    assert "failed to poll from model repository" in raised.value.message


@pytest.mark.parametrize(
    ("config", "files", "match"),
    [
        ("{not json", None, "is not JSON"),
        ("[1, 2]", None, "must be a JSON object"),
        ('{"max_batch_size": "many"}', None, "max_batch_size"),
        ('{"name": "other"}', None, "names model 'other'"),
        ('{"no_such_field": 1}', None, "no_such_field"),
        ("", {"1/model.txt": b""}, "needs a 'config' parameter"),
    ],
)
def test_unusable_overrides_are_refused(config: str, files: dict[str, bytes] | None, match: str) -> None:
    with pytest.raises(TritonError, match=match) as raised:
        parse_override("m", config, files)
    assert raised.value.code is ErrorCode.INVALID_ARG
    assert raised.value.message.startswith("failed to load 'm': ")


def test_no_config_means_the_repository_s_own() -> None:
    assert parse_override("m", "", None) is None
    assert parse_override("m", None, {}) is None


def test_load_parameters_are_split_and_checked() -> None:
    assert split_load_parameters("m", {"config": "{}", "file:1/a": b"x"}) == ("{}", {"1/a": b"x"})
    for bad, match in (
        ({"config": 5}, "must be a string"),
        ({"file:1/a": "text"}, "must hold the file's bytes"),
        ({"bogus": "x"}, "unknown load parameter 'bogus'"),
    ):
        with pytest.raises(TritonError, match=match):
            split_load_parameters("m", bad)


def test_a_folder_stamp_changes_with_what_triton_looks_at(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "config.pbtxt").write_text("a")
    (tmp_path / "1" / "model.txt").write_text("x")
    first = folder_stamp(tmp_path)
    assert folder_stamp(tmp_path) == first
    (tmp_path / ".hidden").write_text("ignored")
    assert folder_stamp(tmp_path) == first
    later = time.time() + 5
    os.utime(tmp_path / "1" / "model.txt", (later, later))
    touched = folder_stamp(tmp_path)
    assert touched != first
    (tmp_path / "2").mkdir()
    assert folder_stamp(tmp_path) != touched
    assert folder_stamp(tmp_path / "missing").startswith("unreadable")
