"""The model config against an engine: auto-complete and checks, as Triton's TensorRT backend does.

All functions here take plain data (a config dict in Triton's JSON form and an
``EngineInfo``) and raise ``TritonError`` with Triton's wording.

``complete_config`` follows Triton's ``AutoCompleteConfigHelper``:

- the config's own dims hint at batching: a tensor whose dims have one fewer
  dimension than the engine's says "batching" (an ``allow_ragged_batch`` one
  too), one with as many says "no batching"; contradicting hints fail;
- the engine's batch limit is taken from its optimization profiles: when
  every input's leading dimension is dynamic (-1), the largest of the
  instance groups' profiles' (by default profile 0) smallest ``max`` leading
  dimension over the inputs; otherwise the engine does not batch;
- ``max_batch_size`` 0 (or absent) becomes that limit (0 when the config's
  dims say "no batching"); a larger configured value fails; a model that
  batches by more than 1 gets ``dynamic_batching`` unless it has a scheduler;
- with no ``input`` (``output``) entries, every engine input (output) is
  added; with some, only their missing data types and dims are filled in
  (missing tensors are reported by ``check_config``, as Triton does at load).

``check_config`` is Triton's per-instance validation of the config against
the engine (names, counts, data types, dims, IO formats, ``batch_input`` targets,
the profile's shape range).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tritonpy_sdk import TritonError, sequence_inputs, sequence_state_outputs

from ._engine import EngineInfo, ProfileShapes, TensorInfo
from ._types import config_type, type_text


def shape_text(dims: Iterable[int]) -> str:
    """A shape the way Triton prints one: ``[-1,3]``."""
    return "[" + ",".join(str(int(d)) for d in dims) + "]"


def config_dims(entry: dict[str, Any]) -> list[int]:
    """An input or output entry's dims as the model sees them (``reshape`` first)."""
    reshape = entry.get("reshape")
    dims = reshape.get("shape", []) if reshape else entry.get("dims", [])
    return [int(d) for d in dims or []]


def max_batch_size(config: dict[str, Any]) -> int:
    return int(config.get("max_batch_size", 0) or 0)


# ---- profiles ------------------------------------------------------------------------------


def profile_index(name: str) -> int:
    """A profile name of ``instance_group.profile`` as its index (Triton's ``GetProfileIndex``)."""
    if not name:
        raise TritonError.invalid_arg("profile name must not be empty")
    try:
        return int(name)
    except ValueError:
        raise TritonError.invalid_arg(f"unable to parse '{name}': stoi") from None


def group_profiles(config: dict[str, Any]) -> list[int]:
    """The profiles every instance group of ``config`` names; ``[0]`` when none does."""
    found = sorted(
        {profile_index(str(p)) for g in config.get("instance_group", []) for p in g.get("profile", [])}
    )
    return found or [0]


def instance_group(config: dict[str, Any], instance_name: str) -> dict[str, Any]:
    """The instance group an instance named ``<group>_<index>`` belongs to."""
    for group in config.get("instance_group", []):
        prefix = f"{group.get('name', '')}_"
        if instance_name.startswith(prefix) and instance_name[len(prefix) :].isdigit():
            return dict(group)
    return {}


def instance_profiles(
    model_name: str, instance_name: str, group: dict[str, Any], count: int
) -> list[tuple[str, int]]:
    """(name, index) of the profiles an instance runs with: its group's ``profile`` list,
    or Triton's ``("default", 0)``; an index the engine lacks is Triton's load error."""
    names = [str(p) for p in group.get("profile", [])]
    if not names:
        return [("default", 0)]
    chosen = []
    for name in names:
        index = profile_index(name)
        if index < 0 or index >= count:
            raise TritonError.invalid_arg(
                f"Can not set the specified optimization profile {name}[{index}] for {instance_name}. "
                f"Expected optimization profile index range 0-{count - 1}"
            )
        chosen.append((name, index))
    return chosen


def engine_max_batch_size(engine: EngineInfo, profiles: Sequence[int]) -> int:
    """The largest batch ``profiles`` allow, 0 when the engine cannot batch.

    Batching needs every (non-shape) input to lead with a dynamic dimension;
    each profile allows the smallest ``max`` leading dimension of its inputs (a
    shape tensor's first ``max`` value, the batch size it allows), and the engine
    the largest of those over ``profiles`` (Triton's ``GetMaxSupportedBatchSize``).
    """
    inputs = [t for t in engine.inputs if not t.is_shape_tensor]
    if not inputs or any(not t.dims or t.dims[0] != -1 for t in inputs):
        return 0
    best = 0
    for index in profiles:
        if index < 0 or index >= len(engine.profiles):
            continue
        profile = engine.profiles[index]
        limits = [profile.max(t.name)[0] for t in inputs]
        limits += [ranges[2][0] for ranges in profile.values.values() if ranges[2]]
        best = max(best, min(limits))
    return best


# ---- auto-complete -------------------------------------------------------------------------


def complete_config(model_name: str, config: dict[str, Any], engine: EngineInfo) -> list[str]:
    """Complete ``config`` from ``engine`` in place (see the module docstring); return the
    warnings to log."""
    warnings: list[str] = []
    profiles = group_profiles(config)
    for index in profiles:
        if index >= len(engine.profiles):
            raise TritonError.invalid_arg(
                f"unable to autofill for '{model_name}', configuration specified invalid profile "
                f"{index} . Number of profiles supported by TensorRT engine: {len(engine.profiles)}"
            )
    hint = False
    with_shape = 0
    allowed = {
        "input": [t.name for t in engine.inputs],
        "output": [t.name for t in engine.outputs],
    }
    for kind in ("input", "output"):
        for entry in config.get(kind, []):
            if entry.get("allow_ragged_batch"):
                hint = True  # a ragged tensor is itself a hint for batching
                continue
            name = str(entry.get("name", ""))
            if name not in allowed[kind]:
                raise TritonError.invalid_arg(
                    f"unexpected inference {kind} '{name}', allowed {kind}s are: {', '.join(allowed[kind])}"
                )
            dims = config_dims(entry)
            if not dims:
                continue
            with_shape += 1
            tensor = engine.tensor(name)
            assert tensor is not None
            if tensor.is_shape_tensor:
                should_batch = bool(tensor.dims) and tensor.dims[0] == dims[0] + 1
            else:
                should_batch = len(tensor.dims) == len(dims) + 1
            if should_batch:
                hint = True
            elif hint:
                raise TritonError.invalid_arg(
                    f"unable to autofill for '{model_name}', model tensor configurations are "
                    "contradicting each other in terms of whether batching is supported"
                )
    limit = engine_max_batch_size(engine, profiles)
    if hint and limit == 0:
        raise TritonError.invalid_arg(
            f"autofill failed for model '{model_name}': model tensor shape configuration hints for "
            "dynamic batching but the underlying engine doesn't support batching."
        )
    if with_shape and not hint:
        warnings.append(
            f"The specified dimensions in model config for {model_name} hints that batching is unavailable"
        )
        limit = 0
    configured = max_batch_size(config)
    if configured == 0:
        config["max_batch_size"] = limit
    elif configured > limit:
        raise TritonError.invalid_arg(
            f"autofill failed for model '{model_name}': configuration specified max-batch {configured} "
            f"but TensorRT engine only supports max-batch {limit}"
        )
    batching = max_batch_size(config) > 0
    if max_batch_size(config) > 1 and "sequence_batching" not in config and "dynamic_batching" not in config:
        config["dynamic_batching"] = {}
    for kind, tensors in (("input", engine.inputs), ("output", engine.outputs)):
        entries = config.setdefault(kind, [])
        if kind == "input":  # fed by the core (sequence controls, states) or the backend
            fed = sequence_inputs(config) | _batch_input_targets(config)
            tensors = tuple(t for t in tensors if t.name not in fed)
        else:
            kept = sequence_state_outputs(config)
            tensors = tuple(t for t in tensors if t.name not in kept)
        references = {t.name: _reference_entry(model_name, kind, t, batching) for t in tensors}
        if not entries:
            entries.extend(references.values())
            continue
        for entry in entries:
            ref = references.get(str(entry.get("name", "")))
            if ref is None:
                continue
            if entry.get("data_type", "TYPE_INVALID") in ("", "TYPE_INVALID"):
                entry["data_type"] = ref["data_type"]
            if not entry.get("dims"):
                entry["dims"] = list(ref["dims"])
                if "reshape" in ref:
                    entry["reshape"] = dict(ref["reshape"])
            if ref.get("is_shape_tensor"):
                entry["is_shape_tensor"] = True
            elif entry.get("is_shape_tensor"):
                raise TritonError.invalid_arg(f"'{ref['name']}' is incorrectly specified as a shape tensor.")
            if ref.get("is_non_linear_format_io"):
                entry["is_non_linear_format_io"] = True
            elif entry.get("is_non_linear_format_io"):
                raise TritonError.invalid_arg(_format_message(f"'{ref['name']}'", linear=True))
    return warnings


def _reference_entry(model_name: str, kind: str, tensor: TensorInfo, batching: bool) -> dict[str, Any]:
    """The config entry Triton derives for an engine tensor (``GetRefIO`` / ``InitIODims``)."""
    data_type = config_type(tensor.data_type)
    if data_type is None:
        raise _unsupported_type(model_name, kind, tensor)
    entry: dict[str, Any] = {"name": tensor.name, "data_type": data_type}
    if tensor.is_non_linear:
        entry["is_non_linear_format_io"] = True
    if tensor.is_shape_tensor:
        entry["dims"] = [tensor.dims[0] - (1 if batching else 0)] if tensor.dims else []
        entry["is_shape_tensor"] = True
        return entry
    dims = list(tensor.dims[1:] if batching else tensor.dims)
    if not dims:  # 'dims' may not be empty: [1], reshaped to the engine's scalar
        entry["dims"] = [1]
        entry["reshape"] = {"shape": []}
    else:
        entry["dims"] = dims
    return entry


def _unsupported_type(model_name: str, kind: str, tensor: TensorInfo) -> TritonError:
    return TritonError.unsupported(
        f"{kind} '{tensor.name}' of model '{model_name}' has TensorRT data type {tensor.data_type}, "
        "which Triton has no data type for"
    )


def _format_message(subject: str, linear: bool) -> str:
    """Triton's words for an ``is_non_linear_format_io`` that contradicts the engine."""
    if linear:
        return (
            f"{subject} uses a linear IO format, but 'is_non_linear_format_io' is incorrectly set "
            "to true in the model configuration."
        )
    return (
        f"{subject} uses a non-linear IO format, but 'is_non_linear_format_io' is incorrectly set "
        "to false in the model configuration."
    )


def _batch_input_targets(config: dict[str, Any]) -> set[str]:
    return {t for b in config.get("batch_input", []) for t in b.get("target_name", [])}


# ---- checks --------------------------------------------------------------------------------


def check_config(
    model_name: str,
    config: dict[str, Any],
    engine: EngineInfo,
    profiles: Sequence[int] = (0,),
    where: str | None = None,
) -> None:
    """Raise ``TritonError`` where ``config`` contradicts ``engine`` or the shape range of
    ``profiles``, in Triton's words; ``where`` names the instance (default: the model)."""
    where = where or model_name
    batching = max_batch_size(config) > 0
    fed = sequence_inputs(config) | _batch_input_targets(config)
    kept = sequence_state_outputs(config)
    engine_inputs = [t for t in engine.inputs if t.name not in fed]
    engine_outputs = [t for t in engine.outputs if t.name not in kept]
    config_inputs = config.get("input", [])
    scattered = {str(t) for b in config.get("batch_output", []) for t in b.get("target_name", [])}
    if len(config_inputs) > len(engine_inputs):
        raise TritonError.invalid_arg(
            f"unable to load model '{model_name}', configuration expects {len(config_inputs)} inputs, "
            f"model provides at most {len(engine_inputs)}"
        )
    seen: set[str] = set()
    for kind, entries in (("input", config_inputs), ("output", config.get("output", []))):
        for entry in entries:
            name = str(entry.get("name", ""))
            if name in seen:
                raise TritonError.invalid_arg(
                    f"{kind} '{name}' has already appeared as an input or output for {where}"
                )
            seen.add(name)
            found = engine.tensor(name)
            if found is None:
                raise TritonError.invalid_arg(f"'{name}' does not map to an input or output tensor")
            if found.is_input != (kind == "input"):
                raise TritonError.invalid_arg(
                    f"{kind} '{name}' is expected to be an {kind} in model for {where}"
                )
            if bool(entry.get("is_shape_tensor")) != found.is_shape_tensor:
                subject = f"{kind} '{name}' for model '{model_name}'"
                raise TritonError.internal(
                    f"{subject} is a shape tensor but the model configuration doesn't mark it as a shape "
                    "tensor."
                    if found.is_shape_tensor
                    else f"{subject} is incorrectly marked as a shape tensor in the model configuration."
                )
            if found.is_shape_tensor:
                _check_shape_tensor(model_name, kind, entry, found, batching, where)
                continue
            _check_type(model_name, kind, entry, found, where)
            if name not in scattered:  # a batch_output's dims are its requests' (Triton skips it too)
                _check_dims(model_name, entry, found, batching)
            if bool(entry.get("is_non_linear_format_io")) != found.is_non_linear:
                subject = f"{kind} '{name}' for model '{model_name}'"
                raise TritonError.internal(_format_message(subject, linear=not found.is_non_linear))
    for batch_input in config.get("batch_input", []):
        for target in batch_input.get("target_name", []):
            found = engine.tensor(str(target))
            if found is None or not found.is_input:
                raise TritonError.invalid_arg(
                    f"batch input '{target}' of model '{model_name}' is not an input of the engine ({where})"
                )
            _check_type(model_name, "input", batch_input, found, where)
    for tensor in (*engine_inputs, *engine_outputs):
        if tensor.name not in seen:
            kind = "input" if tensor.is_input else "output"
            raise TritonError.invalid_arg(f"expected configuration for {kind} '{tensor.name}' for {where}")
    for tensor in (*engine.inputs, *engine.outputs):
        if tensor.is_non_linear:
            raise TritonError.unsupported(
                f"{'input' if tensor.is_input else 'output'} '{tensor.name}' of model '{model_name}' uses "
                f"TensorRT's non-linear IO format {tensor.io_format}, which the tritonpy TensorRT backend "
                "does not serve: build the engine with linear IO formats (trtexec's default, or "
                "--inputIOFormats/--outputIOFormats with ':linear')"
            )
    for index in profiles:
        profile = engine.profiles[index]
        for entry in config_inputs:
            _check_profile_range(model_name, entry, profile, batching)


def _check_shape_tensor(
    model: str, kind: str, entry: dict[str, Any], tensor: TensorInfo, batching: bool, where: str
) -> None:
    """Triton's checks of a shape tensor's entry (``InitializeShapeInputBinding``, its output
    twin, ``CompareShapeDimsSupported``): INT32 or INT64 values in (INT64 out), the engine's
    type, and 1-D, one value longer in the engine when the model batches (the batch size)."""
    given = str(entry.get("data_type", "TYPE_INVALID"))
    engine_type = config_type(tensor.data_type) or type_text(tensor.data_type)
    name = tensor.name
    if kind == "input":
        if given not in ("TYPE_INT32", "TYPE_INT64"):
            raise TritonError.invalid_arg(
                f"unexpected datatype {given} in model configuration for shape input '{name}', "
                f"expecting TYPE_INT32 or TYPE_INT64 for {where}"
            )
        if engine_type != given:
            raise TritonError.invalid_arg(
                f"unexpected datatype {engine_type} in engine for shape input '{name}', expecting {given} "
                f"for {where}"
            )
    else:
        if given != "TYPE_INT64":  # the lone quote is Triton's
            raise TritonError.invalid_arg(
                f"unexpected datatype '{given} in model configuration for shape output '{name}', "
                f"expecting TYPE_INT64 for {where}"
            )
        if engine_type != given:
            raise TritonError.invalid_arg(
                f"unexpected datatype {engine_type} for inference output '{name}', expecting {given} "
                f"for {where}"
            )
    dims = config_dims(entry)
    engine_dims = list(tensor.dims)
    if len(engine_dims) > 1:
        raise TritonError.internal(
            f"unable to load model '{model}', shape binding '{name}' can only be 0-d or 1-D tensor, got "
            f"{shape_text(engine_dims)}"
        )
    if len(dims) != len(engine_dims) or (
        engine_dims and (dims[0] == -1 or dims[0] + (1 if batching else 0) != engine_dims[0])
    ):
        raise TritonError.internal(
            f"unable to load model '{model}', binding '{name}' shape expected by framework "
            f"{shape_text(engine_dims)} doesn't match model configuration shape {shape_text(dims)}"
        )


def _check_type(model: str, kind: str, entry: dict[str, Any], tensor: TensorInfo, where: str) -> None:
    expected = config_type(tensor.data_type)
    if expected is None:
        raise _unsupported_type(model, kind, tensor)
    given = str(entry.get("data_type", "TYPE_INVALID"))
    if given != expected:
        # Triton's words, engine type first: "unexpected datatype <engine> ..., expecting <config>".
        raise TritonError.invalid_arg(
            f"unexpected datatype {type_text(tensor.data_type)} for inference {kind} '{tensor.name}', "
            f"expecting {given} for {where}"
        )


def _check_dims(model: str, entry: dict[str, Any], tensor: TensorInfo, batching: bool) -> None:
    """Triton's ``CompareDimsSupported``: a -1 on either side matches any size."""
    name = tensor.name
    engine_dims = list(tensor.dims)
    if entry.get("allow_ragged_batch"):
        if engine_dims != [-1]:
            raise TritonError.invalid_arg(
                f"model '{model}', tensor '{name}': for the model to support ragged input, the engine "
                f"shape is: {shape_text(engine_dims)} while the model config shape is: "
                f"{shape_text(config_dims(entry))}"
            )
        return
    dims = config_dims(entry)
    prefix = f"model '{model}', tensor '{name}': "
    if batching:
        if not engine_dims:
            raise TritonError.invalid_arg(
                prefix + "for the model to support batching the shape should have at least 1 dimension; "
                f"but shape expected by the model is {shape_text(engine_dims)}"
            )
        full = [-1, *dims]
        if not _compatible(engine_dims, full):
            raise TritonError.invalid_arg(
                prefix + f"the model expects {len(engine_dims)} dimensions (shape "
                f"{shape_text(engine_dims)}) but the model configuration specifies {len(full)} dimensions "
                "(an initial batch dimension because max_batch_size > 0 followed by the explicit tensor "
                f"shape, making complete shape {shape_text(full)})"
            )
    elif not _compatible(engine_dims, dims):
        raise TritonError.invalid_arg(
            prefix + f"the model expects {len(engine_dims)} dimensions (shape {shape_text(engine_dims)}) "
            f"but the model configuration specifies {len(dims)} dimensions (shape {shape_text(dims)})"
        )


def _compatible(engine_dims: Sequence[int], dims: Sequence[int]) -> bool:
    return len(engine_dims) == len(dims) and all(
        e == -1 or d == -1 or e == d for e, d in zip(engine_dims, dims)
    )


def _check_profile_range(model: str, entry: dict[str, Any], profile: ProfileShapes, batching: bool) -> None:
    """Fixed config dims must lie in the profile's range (Triton's ``ConfigureInputDimensions``)."""
    name = str(entry.get("name", ""))
    if name not in profile.shapes or entry.get("allow_ragged_batch"):
        return
    full = [-1, *config_dims(entry)] if batching else config_dims(entry)
    problem = range_problem(full, profile.min(name), profile.max(name))
    if problem:
        raise TritonError.invalid_arg(
            f"model configuration specified invalid shape for input '{name}' for model {model}. "
            f"Error details: {problem}"
        )


def range_problem(shape: Sequence[int], low: Sequence[int], high: Sequence[int]) -> str:
    """Triton's ``ValidateDimension``: why ``shape`` is outside [``low``, ``high``] ("" if it
    is not); a -1 in ``shape`` (a dimension the config leaves open) is never out of range."""
    if len(shape) != len(high):
        return f"model expected {len(high)} dimensions but received {len(shape)} dimensions"
    for i, d in enumerate(shape):
        if d != -1 and not low[i] <= d <= high[i]:
            return (
                f"model expected the shape of dimension {i} to be between {low[i]} and {high[i]} "
                f"but received {d}"
            )
    return ""
