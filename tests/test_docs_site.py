"""The documentation site (mkdocs.yml over docs/) builds with --strict: a broken link or
anchor, a page left out of the navigation, or an SDK docstring mkdocstrings cannot read
fails the suite (``./dev docs`` builds the same site)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra")
    pytest.importorskip("material", reason="the docs extra")
    pytest.importorskip("mkdocstrings", reason="the docs extra")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "sdk" / "index.html").read_text().count("InferenceRequest") > 0
