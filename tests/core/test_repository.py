import logging
from pathlib import Path

import pytest
from tritonpy.repository import read_labels, scan_repositories, select_versions, version_dirs
from tritonpy.repository.dependencies import folder_members


def _model(root: Path, name: str, versions: list[str]) -> Path:
    path = root / name
    path.mkdir(parents=True)
    for v in versions:
        (path / v).mkdir()
    return path


def test_scan_finds_models_across_roots_and_ignores_hidden(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _model(a, "m1", ["1"])
    _model(b, "m2", ["1"])
    _model(a, ".hidden", ["1"])
    (a / "README.txt").parent.mkdir(exist_ok=True)
    (a / "README.txt").write_text("not a model")
    found = scan_repositories([a, b])
    assert [(m.name, m.error) for m in found] == [("m1", None), ("m2", None)]


def test_same_model_in_two_roots_is_an_error_for_that_model(tmp_path: Path) -> None:
    _model(tmp_path / "a", "m", ["1"])
    _model(tmp_path / "b", "m", ["1"])
    (found,) = scan_repositories([tmp_path / "a", tmp_path / "b"])
    assert found.error is not None and "exists in multiple model repositories" in found.error


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="failed to stat model repository path"):
        scan_repositories([tmp_path / "nope"])


def test_root_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "repo").write_text("")
    with pytest.raises(FileNotFoundError, match="not a valid directory: .*repo. is a file"):
        scan_repositories([tmp_path / "repo"])


def test_version_dirs_are_numbers_zero_included(tmp_path: Path) -> None:
    # Triton 2.51 loads a "0" folder as version 0 (observed: /v2/models/m/versions/0/ready is 200)
    path = _model(tmp_path, "m", ["1", "3", "10", "0", "abc", ".5"])
    (path / "7").write_text("a file, not a folder")
    assert sorted(version_dirs(path)) == [0, 1, 3, 10]


def test_a_version_with_a_leading_zero_is_ignored_with_triton_s_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _model(tmp_path, "m", ["01", "2", "00", "abc", "warmup", "initial_state", "configs", "\u0661"])
    with caplog.at_level(logging.WARNING, logger="tritonpy"):
        assert sorted(version_dirs(path)) == [2]
    assert sorted(r.getMessage() for r in caplog.records) == [
        "ignore version directory '00' which contains leading zeros in its directory name",
        "ignore version directory '01' which contains leading zeros in its directory name",
        "ignore version directory 'abc' which fails to convert to integral number",
        "ignore version directory '\u0661' which fails to convert to integral number",
    ]


@pytest.mark.parametrize(
    ("policy", "loaded", "missing"),
    [
        ({}, [10], []),
        ({"latest": {"num_versions": 2}}, [3, 10], []),
        ({"latest": {"num_versions": 9}}, [1, 3, 10], []),
        ({"all": {}}, [1, 3, 10], []),
        ({"specific": {"versions": [3, 1, 4]}}, [1, 3], [4]),
    ],
)
def test_version_policies(policy: dict, loaded: list[int], missing: list[int]) -> None:
    assert select_versions(policy, [10, 1, 3]) == (loaded, missing)


def test_labels_one_per_line(tmp_path: Path) -> None:
    path = tmp_path / "labels.txt"
    path.write_text("cat\ndog\n\nbird\n")
    assert read_labels(path) == ["cat", "dog", "", "bird"]


def test_a_model_config_name_picks_the_folders_custom_config(tmp_path: Path) -> None:
    """``--model-config-name``: ``configs/<name>.pbtxt`` where a folder has it, else its
    ``config.pbtxt``; an ensemble's members are read from the config it will load."""
    repo = tmp_path / "repo"
    for name in ("plain", "pipeline"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text('platform: "ensemble"\n')
    (repo / "pipeline" / "configs").mkdir()
    (repo / "pipeline" / "configs" / "h100.pbtxt").write_text(
        'platform: "ensemble"\nensemble_scheduling { step [{ model_name: "fast" model_version: -1 }] }\n'
    )
    pipeline, plain = scan_repositories([repo], "h100")
    assert pipeline.config_path == repo / "pipeline" / "configs" / "h100.pbtxt"
    assert plain.config_path == repo / "plain" / "config.pbtxt"
    assert folder_members(pipeline) == ["fast"]
    (default,) = [e for e in scan_repositories([repo]) if e.name == "pipeline"]
    assert default.config_path == repo / "pipeline" / "config.pbtxt"
    assert folder_members(default) == []
