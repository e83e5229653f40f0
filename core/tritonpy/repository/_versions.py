"""Triton's ``version_policy``: which of a model's versions are served."""

from __future__ import annotations

from typing import Any


def select_versions(policy: dict[str, Any], available: list[int]) -> tuple[list[int], list[int]]:
    """Versions to load under ``policy`` (config JSON form), and those missing.

    ``latest {num_versions: N}`` (the default, N=1) takes the N highest;
    ``all {}`` takes every version; ``specific {versions: [...]}`` takes those
    listed, and any that has no folder is returned as missing.
    """
    ordered = sorted(available)
    if "all" in policy:
        return ordered, []
    if "specific" in policy:
        wanted = sorted({int(v) for v in policy["specific"].get("versions", [])})
        have = set(ordered)
        return [v for v in wanted if v in have], [v for v in wanted if v not in have]
    latest = policy.get("latest", {})
    n = int(latest.get("num_versions", 1) or 1)
    return ordered[-n:] if ordered else [], []
