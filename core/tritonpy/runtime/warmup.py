"""Triton's ``model_warmup``: run sample requests on every instance before READY.

Each sample names its inputs with ``zero_data``, ``random_data`` or
``input_data_file`` (raw bytes in the model's ``warmup/`` folder, in the
binary tensor format), a ``batch_size`` and a ``count``. A failing sample makes
the model UNAVAILABLE with the reason.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
from tritonpy_sdk import DataType, InferenceRequest, ModelInstance, Tensor, TritonError
from tritonpy_sdk.host import BackendHooks, execute_collect

from ..codec import array_from_buffer
from ..config import model_config_pb2


def _array(
    name: str, datatype: DataType, spec: Any, shape: list[int], warmup_dir: Path, rng: np.random.Generator
) -> np.ndarray:
    choice = spec.WhichOneof("input_data_type")
    count = math.prod(shape)
    if choice == "input_data_file":
        path = warmup_dir / spec.input_data_file
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TritonError.invalid_arg(f"warmup data file {path} cannot be read: {exc.strerror}") from None
        if datatype is not DataType.BYTES:
            data = data[: count * datatype.itemsize]
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
) -> None:
    """Run every ``model_warmup`` sample ``count`` times on each instance."""
    if len(config.model_warmup) == 0:
        return
    rng = np.random.default_rng(0)
    batching = config.max_batch_size > 0
    decoupled = config.model_transaction_policy.decoupled
    shape_tensors = {i.name for i in config.input if i.is_shape_tensor}  # no batch dimension
    for sample in config.model_warmup:
        batch = max(1, sample.batch_size)
        inputs: dict[str, Tensor] = {}
        for name, spec in sample.inputs.items():
            dims = [int(d) for d in spec.dims]
            if any(d < 0 for d in dims):
                raise TritonError.invalid_arg(
                    f"warmup sample '{sample.name}': input '{name}' has variable dims"
                )
            shape = [batch, *dims] if batching and name not in shape_tensors else dims
            try:
                datatype = DataType.from_config(model_config_pb2.DataType.Name(spec.data_type))
            except ValueError:
                raise TritonError.invalid_arg(
                    f"warmup sample '{sample.name}': input '{name}' has no valid data_type"
                ) from None
            array = _array(name, datatype, spec, shape, model_dir / "warmup", rng)
            inputs[name] = Tensor(name, array, datatype)
        for instance in instances:
            for _ in range(max(1, sample.count)):
                request = InferenceRequest(
                    model_name=config.name,
                    model_version=0,
                    inputs=inputs,
                    id=f"warmup:{sample.name}",
                    batch_size=batch if batching else 1,
                )
                try:
                    responses = execute_collect(
                        functools.partial(hooks.execute, instance), [request], decoupled
                    )[0]
                except TritonError as exc:
                    raise TritonError.invalid_arg(
                        f"model warmup '{sample.name}' failed: {exc.message}"
                    ) from None
                except Exception as exc:  # the backend's bug, reported as the load failure
                    raise TritonError.invalid_arg(f"model warmup '{sample.name}' failed: {exc}") from None
                response = next((r for r in responses if r.error is not None), None)
                if response is not None and response.error is not None:
                    raise TritonError.invalid_arg(
                        f"model warmup '{sample.name}' failed: {response.error.message}"
                    )
