"""Fill a model config from the ONNX graph, as Triton's onnxruntime backend does.

Missing inputs and outputs are added with their data type and dims; a model
whose every input and output has a variable first dimension can batch, so when
the config sets no ``max_batch_size`` it gets the server's default (and the
first dimension leaves ``dims``). What the user wrote is kept, and checked
against the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tritonpy_sdk import Model, TritonError

from ._types import config_type


def _dims(shape: list[Any]) -> list[int]:
    """ORT shapes hold ints, symbolic names (str) or None: variable dims become -1."""
    return [d if isinstance(d, int) and d >= 0 else -1 for d in shape]


def complete_config(
    model: Model,
    inputs: list[Any],
    outputs: list[Any],
    default_max_batch: int,
    overridable: Sequence[Any] = (),
) -> None:
    """Complete ``model.config`` from ORT ``NodeArg`` lists of the graph.

    ``overridable`` are initializers a request may replace: the config may name
    them as (optional) inputs, but they are never added on its behalf.
    """
    config = model.config
    targets = {t for b in config.get("batch_input", []) for t in b.get("target_name", [])}
    graph = [(i.name, i.type, _dims(list(i.shape))) for i in inputs if i.name not in targets]
    extra = [(i.name, i.type, _dims(list(i.shape))) for i in overridable]
    graph_out = [(o.name, o.type, _dims(list(o.shape))) for o in outputs]
    can_batch = all(len(d) > 0 and d[0] == -1 for _, _, d in graph + graph_out)
    max_batch = int(config.get("max_batch_size", 0) or 0)
    if max_batch == 0 and can_batch and not _user_dims_rule_out_batching(config, graph + graph_out):
        max_batch = default_max_batch
        config["max_batch_size"] = max_batch
    if max_batch > 0 and not can_batch:
        raise TritonError.invalid_arg(
            f"unable to load model '{model.name}': configuration sets max_batch_size "
            f"{max_batch} but the model's inputs and outputs do not all have a variable "
            "first dimension, so it cannot batch"
        )
    strip = 1 if max_batch > 0 else 0
    _merge(model.name, "input", config.setdefault("input", []), graph, strip, extra)
    _merge(model.name, "output", config.setdefault("output", []), graph_out, strip)


def _user_dims_rule_out_batching(config: dict[str, Any], graph: list[tuple[str, str, list[int]]]) -> bool:
    """True when the user's dims already spell out the full graph shape (no batching)."""
    by_name = {name: dims for name, _, dims in graph}
    for entry in config.get("input", []) + config.get("output", []):
        dims = entry.get("dims") or []
        full = by_name.get(entry.get("name"))
        if dims and full is not None and len(dims) == len(full):
            return True
    return False


def _merge(
    model: str,
    kind: str,
    entries: list[dict[str, Any]],
    graph: list[tuple[str, str, list[int]]],
    strip: int,
    extra: list[tuple[str, str, list[int]]] | None = None,
) -> None:
    known = {name: (ort_type, dims) for name, ort_type, dims in graph + (extra or [])}
    for entry in entries:
        name = entry.get("name", "")
        if name not in known:
            raise TritonError.invalid_arg(
                f"unable to load model '{model}', configuration expects {kind} '{name}' "
                f"which the model does not have; it has: {', '.join(known)}"
            )
        ort_type, dims = known[name]
        expected_type = config_type(ort_type)
        given_type = entry.get("data_type", "TYPE_INVALID")
        if given_type in ("", "TYPE_INVALID"):
            if expected_type is None:
                raise _unsupported(model, kind, name, ort_type)
            entry["data_type"] = expected_type
        elif expected_type is not None and given_type != expected_type:
            raise TritonError.invalid_arg(
                f"unable to load model '{model}', configuration expects datatype {given_type} "
                f"for {kind} '{name}', model provides {expected_type}"
            )
        if not entry.get("dims"):
            if not entry.get("reshape"):
                entry["dims"] = dims[strip:] or [1]
                if not dims[strip:]:
                    entry["reshape"] = {"shape": []}
        elif not entry.get("reshape") and not entry.get("allow_ragged_batch"):  # ragged inputs arrive flat
            _check_dims(model, kind, name, [-1] * strip + list(entry["dims"]), dims)
    present = {e.get("name") for e in entries}
    for name, ort_type, dims in graph:
        if name in present:
            continue
        data_type = config_type(ort_type)
        if data_type is None:
            raise _unsupported(model, kind, name, ort_type)
        added: dict[str, Any] = {"name": name, "data_type": data_type, "dims": dims[strip:] or [1]}
        if not dims[strip:]:
            added["reshape"] = {"shape": []}
        entries.append(added)


def _check_dims(model: str, kind: str, name: str, configured: list[int], graph: list[int]) -> None:
    compatible = len(configured) == len(graph) and all(c == g or g == -1 for c, g in zip(configured, graph))
    if not compatible:
        raise TritonError.invalid_arg(
            f"unable to load model '{model}': {kind} '{name}' has shape {graph} in the model "
            f"but the configuration gives {configured} (with the batch dimension when "
            "max_batch_size > 0)"
        )


def _unsupported(model: str, kind: str, name: str, ort_type: str) -> TritonError:
    return TritonError.unsupported(f"{kind} '{name}' of model '{model}' has unsupported type {ort_type}")
