"""The model config against the ONNX graph: auto-complete and checks, as Triton's ORT backend does.

``complete_config`` fills what ``config.pbtxt`` leaves out: missing inputs and
outputs get their data type and dims; a model whose every input and output
has a variable first dimension can batch, so when the config sets no
``max_batch_size`` it gets the server's default (and the first dimension
leaves ``dims``). What the user wrote is kept.

``check_config`` compares a final config with the graph (names, data types,
dims) with Triton's wording. It runs after auto-complete and again when an
instance's session is created, so a contradiction is caught even with
``--disable-auto-complete-config``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tritonpy_sdk import Model, TritonError, sequence_inputs, sequence_state_outputs

from ._types import config_type

#: A graph tensor: name, ORT type string (``tensor(float)``), dims with -1 for variable ones.
GraphTensor = tuple[str, str, list[int]]


def graph_tensors(node_args: Iterable[Any]) -> list[GraphTensor]:
    """ORT ``NodeArg``s as (name, type, dims); symbolic or unknown dims become -1."""
    return [
        (a.name, a.type, [d if isinstance(d, int) and d >= 0 else -1 for d in a.shape]) for a in node_args
    ]


def shape_text(dims: Sequence[int]) -> str:
    """A shape the way Triton prints one: ``[-1,3]``."""
    return "[" + ",".join(str(d) for d in dims) + "]"


def complete_config(
    model: Model,
    inputs: list[GraphTensor],
    outputs: list[GraphTensor],
    default_max_batch: int,
    overridable: Sequence[GraphTensor] = (),
) -> None:
    """Complete ``model.config`` from the graph's tensors, then check it.

    ``overridable`` are initializers a request may replace: the config may name
    them as (optional) inputs, but they are never added on its behalf. Targets
    of ``batch_input`` are fed by the backend, and a sequence model's control and
    state inputs by the core: never added as inputs; its state outputs are never
    added as outputs (the core keeps them).
    """
    config = model.config
    targets = _batch_input_targets(config)
    inputs = [t for t in inputs if t[0] not in targets]
    state_outputs = sequence_state_outputs(config)
    outputs = [t for t in outputs if t[0] not in state_outputs]
    can_batch = all(len(d) > 0 and d[0] == -1 for _, _, d in inputs + outputs)
    max_batch = int(config.get("max_batch_size", 0) or 0)
    if max_batch == 0 and can_batch and not _user_dims_rule_out_batching(config, inputs + outputs):
        max_batch = default_max_batch
        config["max_batch_size"] = max_batch
    entries_in = config.setdefault("input", [])
    entries_out = config.setdefault("output", [])
    missing_in = _missing(entries_in, inputs)
    missing_out = _missing(entries_out, outputs)
    if max_batch > 0 and any(not d or d[0] != -1 for _, _, d in missing_in + missing_out):
        raise TritonError.invalid_arg(
            f"autofill failed for model '{model.name}': model does not support batching "
            "while non-zero max_batch_size is specified"
        )
    strip = 1 if max_batch > 0 else 0
    entries_in.extend(_entry(model.name, "input", t, strip) for t in missing_in)
    entries_out.extend(_entry(model.name, "output", t, strip) for t in missing_out)
    # A user entry naming a tensor but not its type: the graph knows it.
    _fill_types(entries_in, [*inputs, *overridable])
    _fill_types(entries_out, outputs)
    check_config(model.name, config, inputs, outputs, overridable)


def check_config(
    model_name: str,
    config: dict[str, Any],
    inputs: list[GraphTensor],
    outputs: list[GraphTensor],
    overridable: Sequence[GraphTensor] = (),
) -> None:
    """Raise ``TritonError`` (INVALID_ARG) where ``config`` contradicts the graph."""
    max_batch = int(config.get("max_batch_size", 0) or 0)
    targets = _batch_input_targets(config)
    required = [t for t in inputs if t[0] not in targets]
    configured = {e.get("name") for e in config.get("input", [])}
    absent = [name for name, _, _ in required if name not in configured]
    if absent:
        raise TritonError.invalid_arg(
            f"unable to load model '{model_name}', configuration expects {len(configured)} inputs, "
            f"model provides {len(required)}: "
            + ", ".join(f"input '{n}'" for n in absent)
            + " of the model is missing from the configuration"
        )
    known_in = {t[0]: t for t in [*required, *overridable]}
    for entry in config.get("input", []):
        _check_entry(model_name, "input", entry, known_in, max_batch)
    known_out = {t[0]: t for t in outputs}
    # A batch output's shape need not match the model's (Triton): it is written flat.
    flat = {str(t) for b in config.get("batch_output", []) for t in b.get("target_name", [])}
    for entry in config.get("output", []):
        _check_entry(model_name, "output", entry, known_out, max_batch, entry.get("name") not in flat)


def _check_entry(
    model: str,
    kind: str,
    entry: dict[str, Any],
    known: dict[str, GraphTensor],
    max_batch: int,
    compare_dims: bool = True,
) -> None:
    name = str(entry.get("name", ""))
    if name not in known:
        raise TritonError.invalid_arg(
            f"unable to load model '{model}': unexpected inference {kind} '{name}', "
            f"allowed {kind}s are: {', '.join(sorted(known))}"
        )
    _, ort_type, model_dims = known[name]
    expected = config_type(ort_type)
    given = entry.get("data_type", "TYPE_INVALID")
    if expected is None:
        raise TritonError.unsupported(
            f"{kind} '{name}' of model '{model}' has type {ort_type}, which Triton has no data type for"
        )
    if given != expected:
        raise TritonError.invalid_arg(
            f"unable to load model '{model}', configuration expects datatype {given} "
            f"for {kind} '{name}', model provides {expected}"
        )
    if not compare_dims:
        return
    if entry.get("allow_ragged_batch"):  # ragged inputs arrive flat, all requests end to end
        if model_dims != [-1]:
            raise TritonError.invalid_arg(
                f"unable to load model '{model}', configuration expects model provides input with "
                f"shape [-1] for ragged input '{name}', model provides {shape_text(model_dims)}"
            )
        return
    reshape = entry.get("reshape")
    dims = [int(d) for d in (reshape.get("shape", []) if reshape else entry.get("dims", []))]
    if not model_dims:  # a scalar in the model
        if any(d != 1 for d in dims):
            raise TritonError.invalid_arg(
                f"unable to load model '{model}', scalar tensor '{name}', should only provide 1 in "
                "the model configuration when the model doesn't support batching. Model "
                f"configuration provided: {shape_text(dims)}."
            )
        return
    _compare_dims(model, name, model_dims, dims, max_batch)


def _compare_dims(model: str, name: str, model_dims: list[int], dims: list[int], max_batch: int) -> None:
    """Triton's CompareDimsSupported, where a variable model dim accepts any configured one."""
    prefix = f"model '{model}', tensor '{name}': "
    if max_batch > 0:
        if model_dims[0] != -1:
            raise TritonError.invalid_arg(
                prefix + "for the model to support batching the shape should have at least 1 "
                "dimension and the first dimension must be -1; but shape expected by the model is "
                + shape_text(model_dims)
            )
        full = [-1, *dims]
        if not _compatible(model_dims, full):
            raise TritonError.invalid_arg(
                prefix + f"the model expects {len(model_dims)} dimensions (shape "
                f"{shape_text(model_dims)}) but the model configuration specifies {len(full)} "
                "dimensions (an initial batch dimension because max_batch_size > 0 followed by "
                f"the explicit tensor shape, making complete shape {shape_text(full)})"
            )
    elif not _compatible(model_dims, dims):
        raise TritonError.invalid_arg(
            prefix + f"the model expects {len(model_dims)} dimensions (shape {shape_text(model_dims)}) "
            f"but the model configuration specifies {len(dims)} dimensions (shape {shape_text(dims)})"
        )


def _compatible(model_dims: list[int], dims: list[int]) -> bool:
    return len(model_dims) == len(dims) and all(m in (-1, d) for m, d in zip(model_dims, dims))


def _batch_input_targets(config: dict[str, Any]) -> set[str]:
    """Graph inputs fed by someone other than the client: ``batch_input`` targets
    (this backend) and a sequence model's control and state inputs (the core)."""
    return {t for b in config.get("batch_input", []) for t in b.get("target_name", [])} | sequence_inputs(
        config
    )


def _fill_types(entries: list[dict[str, Any]], graph: list[GraphTensor]) -> None:
    types = {name: config_type(ort_type) for name, ort_type, _ in graph}
    for entry in entries:
        found = types.get(str(entry.get("name", "")))
        if found and entry.get("data_type", "TYPE_INVALID") in ("", "TYPE_INVALID"):
            entry["data_type"] = found


def _missing(entries: list[dict[str, Any]], graph: list[GraphTensor]) -> list[GraphTensor]:
    present = {e.get("name") for e in entries}
    return [t for t in graph if t[0] not in present]


def _entry(model: str, kind: str, tensor: GraphTensor, strip: int) -> dict[str, Any]:
    name, ort_type, dims = tensor
    data_type = config_type(ort_type)
    if data_type is None:
        raise TritonError.unsupported(
            f"{kind} '{name}' of model '{model}' has type {ort_type}, which Triton has no data type for"
        )
    entry: dict[str, Any] = {"name": name, "data_type": data_type, "dims": dims[strip:] or [1]}
    if not dims[strip:] and strip:
        # A batched scalar: [1] in the config, nothing beyond the batch dim in the model.
        entry["reshape"] = {"shape": []}
    return entry


def _user_dims_rule_out_batching(config: dict[str, Any], graph: list[GraphTensor]) -> bool:
    """True when the user's dims already spell out the full graph shape (so no batch dim)."""
    by_name = {name: dims for name, _, dims in graph}
    for entry in config.get("input", []) + config.get("output", []):
        dims = entry.get("dims") or []
        full = by_name.get(entry.get("name"))
        if dims and full is not None and len(dims) == len(full):
            return True
    return False
