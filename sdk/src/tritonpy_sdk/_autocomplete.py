"""Helpers for ``auto_complete_config``: add what the user's config leaves out, nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._objects import Model


def complete_input(model: Model, name: str, data_type: str, dims: Sequence[int], **fields: Any) -> None:
    """Add input ``name`` (``data_type`` such as ``"TYPE_FP32"``, ``dims`` without the
    batch dimension) to ``model.config`` unless the config already has an input so named."""
    _complete(model, "input", name, data_type, dims, fields)


def complete_output(model: Model, name: str, data_type: str, dims: Sequence[int], **fields: Any) -> None:
    """Add output ``name`` unless the config already has an output so named."""
    _complete(model, "output", name, data_type, dims, fields)


def complete_max_batch_size(model: Model, value: int | None = None) -> None:
    """Set ``max_batch_size`` (``value``, else ``--backend-config=default-max-batch-size``,
    4 by default) unless the user's config sets it, to 0 included."""
    if "max_batch_size" not in model.user_config:
        model.config["max_batch_size"] = model.backend.default_max_batch_size if value is None else value


def _complete(
    model: Model, section: str, name: str, data_type: str, dims: Sequence[int], fields: dict[str, Any]
) -> None:
    entries: list[dict[str, Any]] = model.config.setdefault(section, [])
    if any(entry.get("name") == name for entry in entries):
        return
    entries.append({"name": name, "data_type": data_type, "dims": [int(d) for d in dims], **fields})
