"""Auto-complete of a config from a ``torch.export`` program (beyond Triton).

Triton's PyTorch backend completes nothing: TorchScript keeps no tensor
types or shapes. An exported program does: each input and output placeholder
carries a fake tensor with its dtype and shape, dynamic dimensions being
symbols. Missing inputs are named after ``forward()``'s tensor arguments
(``INPUT__<i>`` where an argument is not a plain tensor), outputs
``OUTPUT__<i>``. A program whose every input and output has a dynamic first
dimension can batch: a config without ``max_batch_size`` gets the server's
default (``--backend-config=default-max-batch-size``, 4) and the first
dimension leaves ``dims``. What the user wrote is kept, and checked.
"""

from __future__ import annotations

from typing import Any

from tritonpy_sdk import Model, TritonError

from ._naming import named_index
from ._programs import argument_aliases, input_leaf_names
from ._sequence import SequenceTensors
from ._types import config_type

#: name, config TYPE_*, dims (-1 for a dynamic one)
Signature = tuple[str, str, list[int]]


def exported_signature(torch: Any, ep: Any) -> tuple[list[Signature], list[Signature]]:
    """The program's user inputs and outputs, with default names, types and dims."""
    import torch.utils._pytree as pytree

    nodes = {n.name: n for n in ep.graph.nodes}
    sig = ep.graph_signature
    leaves_in = input_leaf_names(pytree, ep.call_spec.in_spec)
    aliases = {leaf: name for name, leaf in argument_aliases(ep.module().forward, leaves_in).items()}
    inputs = [
        (aliases.get(i, f"INPUT__{i}"), *_describe(torch, nodes[name]))
        for i, name in enumerate(sig.user_inputs)
    ]
    output_node = next(n for n in ep.graph.nodes if n.op == "output")
    produced = {getattr(a, "name", None): a for a in pytree.tree_flatten(output_node.args[0])[0]}
    outputs = []
    for i, name in enumerate(sig.user_outputs):
        node = produced.get(name)
        if node is None:
            raise TritonError.unsupported(f"output {i} of the exported program is not a tensor")
        outputs.append((f"OUTPUT__{i}", *_describe(torch, node)))
    return inputs, outputs


def _describe(torch: Any, node: Any) -> tuple[str, list[int]]:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise TritonError.unsupported(f"'{node.name}' of the exported program is not a tensor")
    dims = [d if isinstance(d, int) else -1 for d in val.shape]
    return config_type(val.dtype), dims


def complete_config(model: Model, inputs: list[Signature], outputs: list[Signature]) -> None:
    config = model.config
    # A sequence model's controls and states come from the core: never added as inputs or outputs.
    sequence = SequenceTensors.of(config)
    core_fed = (
        _bound(inputs, [t.name for t in sequence.inputs]),
        _bound(outputs, [t.name for t in sequence.state_outputs]),
    )
    every = [
        t
        for tensors, skip in zip((inputs, outputs), core_fed)
        for i, t in enumerate(tensors)
        if i not in skip
    ]
    can_batch = bool(every) and all(d and d[0] == -1 for _, _, d in every)
    max_batch = int(config.get("max_batch_size", 0) or 0)
    user_io = config.get("input", []) + config.get("output", [])
    user_spells_full_shape = any(
        len(e.get("dims") or []) == len(d) for e in user_io for n, _, d in every if e.get("name") == n
    )
    if max_batch == 0 and can_batch and not user_spells_full_shape:
        max_batch = model.backend.default_max_batch_size
        config["max_batch_size"] = max_batch
    strip = 1 if max_batch > 0 else 0
    for kind, tensors, skip in (("input", inputs, core_fed[0]), ("output", outputs, core_fed[1])):
        entries = config.setdefault(kind, [])
        if entries:
            _check(model.name, kind, entries, tensors, strip)
            continue
        for name, data_type, dims in (t for i, t in enumerate(tensors) if i not in skip):
            if data_type == "TYPE_INVALID":
                raise TritonError.unsupported(
                    f"{kind} '{name}' of model '{model.name}' has a dtype Triton has no data type for"
                )
            if strip and (not dims or dims[0] != -1):
                raise TritonError.invalid_arg(
                    f"autofill failed for model '{model.name}': model does not support batching while "
                    "non-zero max_batch_size is specified"
                )
            entries.append({"name": name, "data_type": data_type, "dims": dims[strip:] or [1]})


def _bound(tensors: list[Signature], names: list[str]) -> set[int]:
    """The positions in ``tensors`` that ``names`` bind to (by name or ``<name>__<index>``)."""
    by_name = {name: i for i, (name, _, _) in enumerate(tensors)}
    return {i for i in (by_name.get(n, named_index(n)) for n in names) if i is not None}


def _check(
    model: str, kind: str, entries: list[dict[str, Any]], tensors: list[Signature], strip: int
) -> None:
    """Entries the user wrote, found by name or ordinal: a missing type or dims is filled, a
    contradicting type fails the load. (Names by call structure are bound, and checked, at load.)"""
    by_name = {name: i for i, (name, _, _) in enumerate(tensors)}
    for entry in entries:
        name = str(entry.get("name", ""))
        index = by_name.get(name, named_index(name))
        if index is None or index >= len(tensors):
            continue
        _, data_type, dims = tensors[index]
        given = entry.get("data_type", "TYPE_INVALID")
        if given in ("", "TYPE_INVALID"):
            entry["data_type"] = data_type
        elif given != data_type:
            raise TritonError.invalid_arg(
                f"unable to load model '{model}', configuration expects datatype {given} for {kind} "
                f"'{name}', model provides {data_type}"
            )
        if not entry.get("dims") and not entry.get("reshape"):
            entry["dims"] = dims[strip:] or [1]
