"""Helpers for ``auto_complete_config``: add what the user's config leaves out, nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._datatype import DataType
from ._objects import Model


def complete_input(
    model: Model, name: str, data_type: str | DataType, dims: Sequence[int], **fields: Any
) -> None:
    """Add input ``name`` to ``model.config`` unless the config already has an input so named.

    ``data_type`` is a config name (``"TYPE_FP32"``, ``"TYPE_STRING"``), a protocol name
    (``"FP32"``, ``"BYTES"``) or a ``DataType``; ``dims`` leave out the batch dimension.
    ValueError for an unknown type."""
    _complete(model, "input", name, data_type, dims, fields)


def complete_output(
    model: Model, name: str, data_type: str | DataType, dims: Sequence[int], **fields: Any
) -> None:
    """Add output ``name`` unless the config already has an output so named (``data_type`` and
    ``dims`` as ``complete_input``'s)."""
    _complete(model, "output", name, data_type, dims, fields)


def complete_max_batch_size(model: Model, value: int | None = None) -> None:
    """Set ``max_batch_size`` (``value``, else ``--backend-config=default-max-batch-size``,
    4 by default) unless the user's config sets it, to 0 included."""
    if "max_batch_size" not in model.user_config:
        model.config["max_batch_size"] = model.backend.default_max_batch_size if value is None else value


def config_type_name(data_type: str | DataType) -> str:
    """The ``config.pbtxt`` name of a type given by its config name, protocol name or member."""
    if isinstance(data_type, DataType):
        return data_type.config_name
    try:
        return DataType.from_config(data_type).config_name
    except ValueError:
        pass
    try:
        return DataType.from_protocol(data_type).config_name
    except ValueError:
        known = ", ".join(m.value for m in DataType)
        raise ValueError(
            f"unknown data type '{data_type}': use a config name (TYPE_FP32, TYPE_STRING...), a "
            f"protocol name ({known}) or a DataType"
        ) from None


def _complete(
    model: Model,
    section: str,
    name: str,
    data_type: str | DataType,
    dims: Sequence[int],
    fields: dict[str, Any],
) -> None:
    data_type = config_type_name(data_type)  # checked even when the user's config has the tensor
    entries: list[dict[str, Any]] = model.config.setdefault(section, [])
    if any(entry.get("name") == name for entry in entries):
        return
    entries.append({"name": name, "data_type": data_type, "dims": [int(d) for d in dims], **fields})
