"""Waiting in tests for a condition another thread or process brings about."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(check: Callable[[], object], what: str, timeout: float = 30.0, step: float = 0.01) -> None:
    """Poll ``check`` until it is true; fail the test saying ``what`` never happened.

    ``timeout`` only bounds a hang: it is never what a test checks."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(step)
