"""The command line's own behaviour (its flags are checked against the docs in tests/test_docs.py)."""

from __future__ import annotations

import pytest
from tritonpy.cli import main


def test_serve_without_a_repository_says_what_is_missing_in_a_few_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["serve"])
    assert exit.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "usage: tritonpy serve --model-repository PATH [options]",
        "tritonpy serve: error: the following arguments are required: --model-repository/--model-store",
        "(`tritonpy serve --help` lists every option)",
    ]


def test_a_short_usage_is_printed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([])
    err = capsys.readouterr().err
    assert err.startswith("usage: tritonpy [-h] [--version] {serve,backends,new-backend}")
    assert len(err.splitlines()) == 3
