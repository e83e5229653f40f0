"""The docs name every hook and every CLI flag (a new one without docs fails here)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tritonpy.cli import build_parser
from tritonpy_sdk import _hookspecs

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_hook_is_documented() -> None:
    text = (DOCS / "writing_a_backend.md").read_text()
    hooks = [n for n in dir(_hookspecs) if hasattr(getattr(_hookspecs, n), "tritonpy_spec")]
    assert hooks, "no hook specifications found"
    assert [h for h in hooks if h not in text] == []


def test_every_cli_flag_is_documented() -> None:
    text = (DOCS / "cli.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = [
        opt
        for command in sub.choices.values()
        for action in command._actions
        for opt in action.option_strings
        if opt.startswith("--") and opt != "--help"
    ]
    assert len(flags) > 10
    assert [f for f in flags if f not in text] == []


def test_every_cli_command_is_documented() -> None:
    text = (DOCS / "cli.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert [c for c in sub.choices if f"## `tritonpy {c}" not in text] == []
