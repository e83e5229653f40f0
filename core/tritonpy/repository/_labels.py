"""Label files for the classification extension: one label per line."""

from __future__ import annotations

from pathlib import Path


def read_labels(path: Path) -> list[str]:
    """The labels in ``path``, one per line (trailing newline ignored)."""
    text = path.read_text(encoding="utf-8")
    return text.splitlines()
