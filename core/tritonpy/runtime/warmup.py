"""Triton's ``model_warmup``: run sample requests on every instance before READY.

Each sample names its inputs with ``zero_data``, ``random_data`` or
``input_data_file`` (raw bytes in the model's ``warmup/`` folder, in the
binary tensor format), a ``batch_size`` and a ``count``. A failing sample makes
the model UNAVAILABLE with the reason.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from tritonpy_sdk import DataType, InferenceRequest, ModelInstance, Tensor, TritonError
from tritonpy_sdk.host import BackendHooks, execute_collect

from ..codec import array_from_buffer
from ..config import model_config_pb2
from ..hostpolicy import HostPolicy, bound

log = logging.getLogger("tritonpy.loading")


def _array(
    name: str, datatype: DataType, spec: Any, shape: list[int], warmup_dir: Path, rng: np.random.Generator
) -> np.ndarray:
    """One item of a sample's input (``shape``: with a batch dimension of 1 when the model
    batches), as Triton makes it: zeros, random values, or the start of a data file."""
    choice = spec.WhichOneof("input_data_type")
    count = math.prod(shape)
    if choice == "input_data_file":
        path = warmup_dir / spec.input_data_file
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TritonError.invalid_arg(f"warmup data file {path} cannot be read: {exc.strerror}") from None
        if datatype is not DataType.BYTES:
            need = count * datatype.itemsize
            if len(data) < need:  # Triton's words, its missing space included
                raise TritonError.invalid_arg(
                    f"[request id: <id_unknown>] warmup setting expects {need} bytes, but the data provided "
                    f"from {spec.input_data_file}only has {len(data)} bytes"
                )
            data = data[:need]
        return array_from_buffer(name, datatype, shape, data)
    if datatype is DataType.BYTES:
        out = np.empty(count, dtype=object)
        out[:] = [b"" if choice != "random_data" else rng.bytes(8) for _ in range(count)]
        return out.reshape(shape)
    if choice == "random_data":
        if datatype is DataType.BOOL:
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        if datatype.numpy_dtype.kind in "iu":
            return rng.integers(0, 100, size=shape).astype(datatype.numpy_dtype)
        return rng.random(size=shape).astype(datatype.numpy_dtype)
    return np.zeros(shape, dtype=datatype.numpy_dtype)


def run_warmup(
    hooks: BackendHooks,
    config: Any,
    model_dir: Path,
    instances: list[ModelInstance],
    policies: Mapping[str, HostPolicy] | None = None,
) -> None:
    """Run every ``model_warmup`` sample ``count`` times on each instance, as Triton does:
    a sample of ``batch_size`` N is N requests of one item each (without an id), executed
    together; a sample of batch size 0 is skipped. An instance with a host policy in
    ``policies`` runs its samples bound by it (what a framework starts then is bound)."""
    if len(config.model_warmup) == 0:
        return
    rng = np.random.default_rng(0)
    batching = config.max_batch_size > 0
    decoupled = config.model_transaction_policy.decoupled
    shape_tensors = {i.name for i in config.input if i.is_shape_tensor}  # no batch dimension
    for sample in config.model_warmup:
        if sample.batch_size == 0:
            continue
        inputs: dict[str, Tensor] = {}
        for name, spec in sample.inputs.items():
            dims = [int(d) for d in spec.dims]
            if any(d < 0 for d in dims):
                raise TritonError.invalid_arg(
                    f"warmup setting expects all variable-size dimensions are specified for input '{name}'"
                )
            shape = [1, *dims] if batching and name not in shape_tensors else dims
            try:
                datatype = DataType.from_config(model_config_pb2.DataType.Name(spec.data_type))
            except ValueError:
                raise TritonError.invalid_arg(
                    f"warmup sample '{sample.name}': input '{name}' has no valid data_type"
                ) from None
            array = _array(name, datatype, spec, shape, model_dir / "warmup", rng)
            inputs[name] = Tensor(name, array, datatype)
        for instance in instances:
            for iteration in range(1, max(1, sample.count) + 1):
                log.debug(  # Triton's verbose line, which NVIDIA's L0_warmup looks for
                    "model '%s' instance %s is running warmup sample '%s' for iteration %d",
                    config.name,
                    instance.name,
                    sample.name,
                    iteration,
                )
                requests = [
                    InferenceRequest(model_name=config.name, model_version=0, inputs=dict(inputs))
                    for _ in range(sample.batch_size)
                ]
                with bound((policies or {}).get(instance.name)):
                    _run_sample(hooks, instance, sample.name, requests, decoupled)


def _run_sample(
    hooks: BackendHooks, instance: ModelInstance, name: str, requests: list[InferenceRequest], decoupled: bool
) -> None:
    """One execution of a sample's requests; INVALID_ARG naming every error, in Triton's words
    (``failed to run warmup sample 'w': e1; e2; ``)."""
    try:
        answered = execute_collect(functools.partial(hooks.execute, instance), requests, decoupled)
        errors = [r.error.message for responses in answered for r in responses if r.error is not None]
    except TritonError as exc:  # the whole batch failed: each request has that error
        errors = [exc.message] * len(requests)
    except Exception as exc:  # the backend's bug, reported as the load failure
        errors = [f"{type(exc).__name__}: {exc}"] * len(requests)
    if errors:
        raise TritonError.invalid_arg(
            f"failed to run warmup sample '{name}': " + "".join(f"{e}; " for e in errors)
        )
