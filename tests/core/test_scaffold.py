"""``tritonpy new-backend`` (scaffold.py) renders core/tritonpy/scaffold_template/: every file,
every placeholder, and a package that lints clean under ruff's defaults and mypy --strict.
tests/integration/test_new_backend.py runs its tests, installs it with pip and serves it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tritonpy.scaffold import TEMPLATE, class_name, main, new_backend


def test_every_template_file_is_rendered_to_its_place(tmp_path: Path) -> None:
    target = new_backend("my_model", tmp_path / "pkg")
    written = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert written == [
        "README.md",
        "pyproject.toml",
        "src/tritonpy_backend_my_model/__init__.py",
        "src/tritonpy_backend_my_model/py.typed",
        "tests/test_my_model.py",
    ]
    pyproject = (target / "pyproject.toml").read_text()
    assert 'name = "tritonpy-backend-my-model"' in pyproject
    assert 'my_model = "tritonpy_backend_my_model:MyModel"' in pyproject
    assert "class MyModel(Predictor):" in (target / "src/tritonpy_backend_my_model/__init__.py").read_text()
    assert "from tritonpy_backend_my_model import MyModel" in (target / "tests/test_my_model.py").read_text()
    for path in target.rglob("*"):
        if path.is_file():
            assert "${" not in path.read_text(), path


def test_the_template_holds_only_files_the_scaffold_renders() -> None:
    """A file without ``.tmpl`` would be left out of every package without a word."""
    stray = [
        p.relative_to(TEMPLATE).as_posix()
        for p in TEMPLATE.rglob("*")
        if p.is_file() and not p.name.endswith(".tmpl") and "__pycache__" not in p.parts
    ]
    assert stray == []


@pytest.mark.parametrize(("name", "cls"), [("mine", "Mine"), ("my_backend", "MyBackend"), ("a_2", "A2")])
def test_class_names(name: str, cls: str) -> None:
    assert class_name(name) == cls


@pytest.mark.parametrize("name", ["Mine", "2mine", "my-backend", "my backend", ""])
def test_a_bad_name_is_refused_naming_the_rule(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(name, str(tmp_path / "pkg")) == 1
    assert "must start with a lowercase letter" in capsys.readouterr().err
    assert not (tmp_path / "pkg").exists()


def test_a_folder_in_use_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main("mine", str(tmp_path)) == 1
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_the_default_folder_is_named_for_the_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main("my_backend", None) == 0
    assert (tmp_path / "tritonpy-backend-my-backend" / "pyproject.toml").is_file()
    assert "wrote backend 'my_backend' to tritonpy-backend-my-backend" in capsys.readouterr().out


@pytest.mark.slow
def test_the_package_lints_clean_as_its_author_would_lint_it(tmp_path: Path) -> None:
    """ruff with its defaults plus the rules this repository uses, ruff format, and mypy --strict,
    run in the package folder (its own pyproject.toml, not this repository's)."""
    package = new_backend("my_backend", tmp_path / "pkg")
    bin_dir = Path(sys.executable).parent
    for command in (
        [str(bin_dir / "ruff"), "check", "--no-cache", "--select", "E,F,W,I,UP,B", "."],
        [str(bin_dir / "ruff"), "format", "--no-cache", "--check", "."],
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "mypy")]
        + ["src", "tests"],
    ):
        run = subprocess.run(command, cwd=package, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"{command[:2]}:\n{run.stdout}{run.stderr}"
