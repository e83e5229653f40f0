"""An ensemble's steps bound to its loaded members, checked as Triton checks them.

When an ensemble loads, each step's member must be loaded (in the version the
step names), batch no less than the ensemble, and agree with the ensemble on
every tensor it reads or writes: every member input mapped exactly once,
no mapping to an input or from an output the member lacks, and the same data
type and compatible shapes wherever a tensor is seen (the ensemble's own
inputs and outputs included). Messages are Triton 2.51's. The config's data
flow was checked before (``config/_ensemble.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from tritonpy_sdk import Backend, BackendInfo, InferenceRequest, ModelInstance, TritonError, hookimpl
from tritonpy_sdk.host import validate_backend

from ..config import ModelConfig
from ..config._validate import ENSEMBLE_PLATFORM
from ..config.model_config_pb2 import DataType
from ..memory.placement import input_device
from ..repository.dependencies import config_members
from ..scheduler.ensemble import Step
from .model import LoadedVersion

#: A member's record as the model manager holds it: its serving versions by number,
#: and why it has none (its load failure), or None when no such model is known.
MemberLookup = Callable[[str], "MemberState | None"]


@dataclass(frozen=True, slots=True)
class MemberState:
    """What the ensemble needs to know of one member model when it loads."""

    versions: dict[int, LoadedVersion]
    #: Why it has no version (Triton's "version 1 is at UNAVAILABLE state: ..."), or None.
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class EnsemblePlan:
    steps: tuple[Step, ...]
    #: Whether a member (at any depth) is decoupled: then so is the ensemble.
    decoupled: bool
    #: The classification labels of each tensor a step makes, as its member has them
    #: for that output (``label_filename``, or, for a nested ensemble, what it took so):
    #: those of an ensemble output without labels of its own, as Triton completes them.
    labels: dict[str, list[str]] = field(default_factory=dict)


def plan_ensemble(config: ModelConfig, lookup: MemberLookup) -> EnsemblePlan:
    """Bind ``config``'s steps to their members; TritonError (INVALID_ARG) naming the problem."""
    name = config.name
    states = {member: lookup(member) for member in config_members(config)}
    missing = [member for member, state in states.items() if state is None]
    if missing:
        raise TritonError.invalid_arg(
            f"ensemble {name} contains models that are not available or ambiguous: {', '.join(missing)}"
        )
    batching = config.max_batch_size > 0
    tensors: dict[str, _TensorNode] = {}
    for io in [*config.input, *config.output]:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        tensors.setdefault(io.name, _TensorNode(name, batching, io.data_type, tuple(dims)))
    steps: list[Step] = []
    labels: dict[str, list[str]] = {}
    devices: dict[int, int | None] = {}  # step index: the GPU its member takes inputs on
    decoupled_steps: list[bool] = []
    for index, step in enumerate(config.ensemble_scheduling.step):
        state = states[step.model_name]
        assert state is not None
        member = _member_version(name, step.model_name, step.model_version, state)
        decoupled_steps.append(member.decoupled)
        mbs = member.config.max_batch_size
        if mbs != 0 and mbs < config.max_batch_size:
            raise TritonError.invalid_arg(
                f"ensemble {name} allows maximum batch size {config.max_batch_size}, but it contains "
                f"model {step.model_name} which only allows maximum batch size to be {mbs}"
            )
        _check_mapping(
            name, step.model_name, member.config, dict(step.input_map), dict(step.output_map), tensors
        )
        for member_output, tensor in step.output_map.items():
            found = member.labels.get(member_output)
            if found:
                labels.setdefault(tensor, found)
        devices[index] = input_device(member.instances)
        member_dims = {io.name: tuple(io.dims) for io in member.config.input}
        inputs = tuple(step.input_map.items())
        steps.append(
            Step(
                index=index,
                model_name=step.model_name,
                model_version=int(step.model_version),
                inputs=inputs,
                outputs=tuple(step.output_map.items()),
                batching=mbs > 0,
                input_dims=tuple(member_dims.get(member_input, ()) for member_input, _ in inputs),
            )
        )
    decoupled = _decoupled_flow(config, decoupled_steps, tensors)
    return EnsemblePlan(with_readers(steps, devices), decoupled, labels)


def _decoupled_flow(
    config: ModelConfig, decoupled_steps: list[bool], tensors: dict[str, _TensorNode]
) -> bool:
    """Triton's check of how data from decoupled members flows (2.51), and whether the
    ensemble is decoupled: a reachable step's member is.

    Each tensor a step makes carries a mark: a new one when the step's member is
    decoupled (each of its responses runs the rest of the steps anew), else that of
    its inputs; the ensemble's own inputs carry none, as every run has them. A step
    whose inputs carry different marks, or outputs of the ensemble that do, would
    have to pair responses that come apart: INVALID_ARG, naming the model that first
    produced the step's output tensor (the ensemble, for its own outputs), as Triton
    names it. Unlike Triton, a step may take a decoupled step's results together with
    the ensemble's inputs (Triton marks those too, and refuses the mix)."""
    name = config.name
    marks: dict[str, int | None] = {io.name: None for io in config.input}
    waiting = list(enumerate(config.ensemble_scheduling.step))
    last = 0
    while True:
        ready = [(i, step) for i, step in waiting if all(t in marks for t in step.input_map.values())]
        if not ready:
            break
        for index, step in ready:
            waiting.remove((index, step))
            found = {marks[t] for t in step.input_map.values()} - {None}
            if len(found) > 1:
                first = next(iter(step.output_map.values()), "")
                model = tensors[first].model if first in tensors else step.model_name
                raise TritonError.invalid_arg(
                    f"in ensemble {name}, step of model '{model}' receives inputs originated from "
                    "different decoupled models"
                )
            mark = found.pop() if found else 0
            if decoupled_steps[index]:
                last += 1
                mark = last
            for tensor in step.output_map.values():
                marks.setdefault(tensor, mark)
    if len({marks[io.name] for io in config.output if io.name in marks} - {None}) > 1:
        raise TritonError.invalid_arg(
            f"in ensemble {name}, step of model '{name}' receives inputs originated from different "
            "decoupled models"
        )
    return last > 0


def with_readers(steps: Sequence[Step], devices: dict[int, int | None]) -> tuple[Step, ...]:
    """``steps`` with their ``readers``: for each output, the GPU (from ``devices``,
    by step index; None: host memory) on which each step that reads its tensor
    takes its inputs; ``device_readers`` when one of them is a GPU (else its
    requests are made as they always were, unless the client wants an output on one)."""
    takes: dict[str, list[int | None]] = {}
    for step in steps:
        for _, tensor in step.inputs:
            takes.setdefault(tensor, []).append(devices.get(step.index))
    placed: list[Step] = []
    for step in steps:
        readers = tuple(tuple(takes.get(tensor, ())) for _, tensor in step.outputs)
        on_gpu = any(d is not None for r in readers for d in r)
        placed.append(replace(step, readers=readers, device_readers=on_gpu))
    return tuple(placed)


def _member_version(ensemble: str, member: str, version: int, state: MemberState) -> LoadedVersion:
    """The version of ``member`` a step uses (-1: the latest), as it serves now."""
    if not state.versions:
        message = f"ensemble '{ensemble}' depends on '{member}' which has no loaded version."
        if state.failure:
            message += f" Model '{member}' loading failed with error: {state.failure}"
        raise TritonError.invalid_arg(message)
    if version == -1:
        return state.versions[max(state.versions)]
    found = state.versions.get(int(version))
    if found is None:
        # As Triton: an unset model_version is 0, which no version folder has.
        raise TritonError.invalid_arg(
            f"ensemble '{ensemble}' depends on '{member}' whose required version {version} is not loaded."
        )
    return found


@dataclass(frozen=True, slots=True)
class _TensorNode:
    """An ensemble tensor as one model sees it."""

    model: str
    batching: bool
    data_type: int
    dims: tuple[int, ...]

    @property
    def full_dims(self) -> tuple[int, ...]:
        return (-1, *self.dims) if self.batching else self.dims


def _check_mapping(
    ensemble: str,
    member: str,
    config: ModelConfig,
    input_map: dict[str, str],
    output_map: dict[str, str],
    tensors: dict[str, _TensorNode],
) -> None:
    batching = config.max_batch_size > 0
    where = f"in ensemble {ensemble}"
    inputs = {io.name for io in config.input}
    for member_input, tensor in input_map.items():
        if member_input not in inputs:
            raise TritonError.invalid_arg(
                f"{where}, ensemble tensor {tensor} is mapping to non-existing input {member_input} "
                f"in model {member}"
            )
    for io in config.input:
        mapped = input_map.get(io.name)
        if mapped is None:
            if io.optional:
                continue
            raise TritonError.invalid_arg(
                f"{where}, input {io.name} in model {member} is not mapped to any ensemble tensors"
            )
        _agree(where, mapped, tensors, _TensorNode(member, batching, io.data_type, tuple(io.dims)))
    outputs = {io.name: io for io in config.output}
    for member_output, tensor in output_map.items():
        if member_output not in outputs:
            raise TritonError.invalid_arg(
                f"{where}, ensemble tensor {tensor} is mapped from non-existing output {member_output} "
                f"in model {member}"
            )
    for member_output, tensor in output_map.items():
        io = outputs[member_output]
        _agree(where, tensor, tensors, _TensorNode(member, batching, io.data_type, tuple(io.dims)))


def _agree(where: str, tensor: str, tensors: dict[str, _TensorNode], seen: _TensorNode) -> None:
    """``seen`` agrees with what is known of ``tensor`` (or becomes what is known)."""
    known = tensors.setdefault(tensor, seen)
    if known is seen:
        return
    prefix = f"{where}, ensemble tensor {tensor}: "
    if known.data_type != seen.data_type:
        raise TritonError.invalid_arg(
            f"{prefix}inconsistent data type: {DataType.Name(known.data_type)} is inferred from model "
            f"{known.model} while {DataType.Name(seen.data_type)} is inferred from model {seen.model}"
        )
    if not (_dims_match(known.dims, seen.dims) or _dims_match(known.full_dims, seen.full_dims)):
        raise TritonError.invalid_arg(
            f"{prefix}inconsistent shape: {_dims_text(known.full_dims)} is inferred from model "
            f"{known.model} while {_dims_text(seen.full_dims)} is inferred from model {seen.model}"
        )


def _dims_match(a: Iterable[int], b: Iterable[int]) -> bool:
    a, b = list(a), list(b)
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def _dims_text(dims: Iterable[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


class _NoBackend:
    """What stands in for a backend in an ensemble's versions: nothing runs on it."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(platforms=(ENSEMBLE_PLATFORM,))

    @hookimpl
    def execute(self, instance: ModelInstance, requests: Sequence[InferenceRequest]) -> None:
        raise TritonError.internal("an ensemble has no instances to execute on")  # never called


#: The hooks of every ensemble version (its lifecycle hooks do nothing).
ENSEMBLE_HOOKS = validate_backend(ENSEMBLE_PLATFORM, _NoBackend())
ENSEMBLE_BACKEND = Backend(ENSEMBLE_PLATFORM)
