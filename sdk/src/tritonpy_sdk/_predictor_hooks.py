"""The hooks of a :class:`Predictor` subclass: what the SDK derives from ``load`` and ``predict``.

``predictor_plugin(cls)`` makes a plugin object the server validates and binds
like any hand-written backend: ``instance_initialize`` makes one predictor
per instance and calls ``load``; ``execute`` concatenates a batch's inputs,
calls ``predict`` once, checks and converts what it returned and cuts it back
into one response per request.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._backend_info import BackendInfo
from ._batching import gather_inputs, scatter_output
from ._datatype import DataType
from ._errors import TritonError
from ._hookspecs import hookimpl
from ._inference import InferenceRequest, InferenceResponse
from ._objects import Model, ModelInstance
from ._predictor import Arrays, PartialResult, Predictor
from ._tensor import Tensor, as_bytes_array


class _Runner:
    """One instance's predictor and what ``execute`` needs to call it."""

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor
        model = predictor.model
        self.model_name = model.name
        self.batching = model.max_batch_size > 0
        self.datatypes = {
            str(o["name"]): DataType.from_config(str(o["data_type"])) for o in model.config.get("output", [])
        }
        self._own_loop: asyncio.AbstractEventLoop | None = None

    def close(self) -> None:
        if self._own_loop is not None:
            self._own_loop.close()
            self._own_loop = None

    # -- execute ---------------------------------------------------------------------------

    def run(self, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
        if self.batching and len(requests) > 1 and _uniform(requests):
            return self._run_group(list(requests))
        responses: list[InferenceResponse] = []
        for request in requests:
            responses.extend(self._run_group([request]))
        return responses

    def _run_group(self, group: list[InferenceRequest]) -> list[InferenceResponse]:
        inputs: Arrays = {name: gather_inputs(group, name) for name in group[0].inputs}
        sizes = [r.batch_size for r in group] if self.batching else [0]
        try:
            result = self._predict(group, inputs)
            outputs, errors = self._check(result, sizes)
        except TritonError as exc:
            return [InferenceResponse.from_error(exc) for _ in group]
        except Exception as exc:  # the predictor's own bug: this batch's error, not the server's
            error = TritonError.internal(
                f"predict of model '{self.model_name}' failed: {type(exc).__name__}: {exc}"
            )
            return [InferenceResponse.from_error(error) for _ in group]
        responses = []
        start = 0
        for index, request in enumerate(group):
            rows = range(start, start + sizes[index]) if self.batching else range(1)
            start += sizes[index]
            failed = next((errors[row] for row in rows if row in errors), None)
            if failed is not None:
                responses.append(InferenceResponse.from_error(failed))
            else:
                responses.append(self._response(request, {n: parts[index] for n, parts in outputs.items()}))
        return responses

    def _predict(self, group: list[InferenceRequest], inputs: Arrays) -> Any:
        predictor = self.predictor
        predictor.requests = group
        try:
            result = predictor.predict(inputs)
            if asyncio.iscoroutine(result):
                result = self._wait(result)
            return result
        finally:
            predictor.requests = []

    def _wait(self, coro: Any) -> Any:
        """Run ``predict``'s coroutine on the server's loop, else on this instance's own."""
        server = self.predictor.model.backend.server
        loop = server.event_loop() if server is not None else None
        if loop is not None and loop.is_running():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:  # never block the loop the coroutine needs
                return asyncio.run_coroutine_threadsafe(coro, loop).result()
        if self._own_loop is None:
            self._own_loop = asyncio.new_event_loop()
        return self._own_loop.run_until_complete(coro)

    def _check(
        self, result: Any, sizes: list[int]
    ) -> tuple[dict[str, list[np.ndarray[Any, Any]]], dict[int, TritonError]]:
        """The outputs cut per request, and the failed rows."""
        errors: dict[int, TritonError] = {}
        if isinstance(result, PartialResult):
            result, errors = result.outputs, result.errors
        where = f"predict of model '{self.model_name}'"
        if not isinstance(result, Mapping):
            raise TritonError.internal(
                f"{where} returned {type(result).__name__}; expected a dict of output name to array"
            )
        rows = sum(sizes) if self.batching else 1
        bad_rows = sorted(row for row in errors if not 0 <= row < rows)
        if bad_rows:
            raise TritonError.internal(f"{where} returned errors for rows {bad_rows} of a batch of {rows}")
        outputs: dict[str, list[np.ndarray[Any, Any]]] = {}
        for name, value in result.items():
            array = self._convert(str(name), value)
            if not self.batching:
                outputs[str(name)] = [array]
                continue
            if array.ndim == 0 or array.shape[0] != rows:
                raise TritonError.internal(
                    f"{where} returned output '{name}' with shape {list(array.shape)} for a batch of "
                    f"{rows}: a batching model's outputs keep the batch dimension first"
                )
            outputs[str(name)] = scatter_output(array, sizes)
        return outputs, errors

    def _convert(self, name: str, value: Any) -> np.ndarray[Any, Any]:
        datatype = self.datatypes.get(name)
        where = f"predict of model '{self.model_name}'"
        if datatype is None:
            declared = ", ".join(self.datatypes) or "none"
            raise TritonError.internal(
                f"{where} returned output '{name}', which the config does not declare (outputs: {declared})"
            )
        if datatype is DataType.BYTES:
            return as_bytes_array(np.asarray(value, dtype=np.object_))
        array = np.asarray(value)
        target = datatype.numpy_dtype
        if array.dtype != target:
            if not np.can_cast(array.dtype, target, "same_kind"):
                raise TritonError.internal(
                    f"{where} returned output '{name}' as {array.dtype}; the config declares "
                    f"{datatype.config_name}"
                )
            array = array.astype(target)
        return array

    def _response(
        self, request: InferenceRequest, arrays: dict[str, np.ndarray[Any, Any]]
    ) -> InferenceResponse:
        if not request.requested_outputs:  # every output predict made, in the config's order
            return InferenceResponse(
                {n: Tensor(n, arrays[n], t) for n, t in self.datatypes.items() if n in arrays}
            )
        wanted = [o.name for o in request.requested_outputs]
        missing = [n for n in wanted if n not in arrays]
        if missing:
            return InferenceResponse.from_error(
                TritonError.internal(
                    f"predict of model '{self.model_name}' returned no output "
                    + ", ".join(f"'{n}'" for n in missing)
                    + " that the request asks for"
                )
            )
        return InferenceResponse({n: Tensor(n, arrays[n], self.datatypes[n]) for n in wanted})


def _uniform(requests: Sequence[InferenceRequest]) -> bool:
    """Whether the requests' inputs concatenate: same names, dtypes and shapes beyond the batch."""
    first = requests[0].inputs
    for request in requests[1:]:
        if request.inputs.keys() != first.keys():
            return False
        for name, tensor in request.inputs.items():
            other = first[name].data
            if tensor.data.dtype != other.dtype or tensor.data.shape[1:] != other.shape[1:]:
                return False
    return True


class PredictorPlugin:
    """The hooks of one ``Predictor`` subclass, as a plugin object."""

    def __init__(self, cls: type[Predictor]) -> None:
        self.predictor_class = cls

    def __repr__(self) -> str:
        return f"<backend {self.predictor_class.__module__}.{self.predictor_class.__qualname__}>"

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return self.predictor_class.backend_info

    @hookimpl
    def instance_initialize(self, instance: ModelInstance) -> None:
        predictor = self.predictor_class(instance)
        predictor.load()
        instance.state = _Runner(predictor)

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        runner: _Runner = instance.state
        return runner.run(requests)

    @hookimpl
    def instance_finalize(self, instance: ModelInstance) -> None:
        runner: _Runner | None = instance.state
        if runner is None:
            return
        instance.state = None
        try:
            runner.predictor.unload()
        finally:
            runner.close()


class _AutoCompletingPlugin(PredictorPlugin):
    @hookimpl
    def auto_complete_config(self, model: Model) -> None:
        self.predictor_class.auto_complete(model)


def predictor_plugin(cls: type[Predictor]) -> PredictorPlugin:
    """The plugin object for ``cls``: its hooks, with ``auto_complete_config`` only
    when ``cls`` overrides ``auto_complete`` (so the server knows it has none)."""
    if not isinstance(cls.backend_info, BackendInfo):
        raise TypeError(f"{cls.__qualname__}.backend_info must be a tritonpy_sdk.BackendInfo")
    overrides = inspect.getattr_static(cls, "auto_complete") is not inspect.getattr_static(
        Predictor, "auto_complete"
    )
    return _AutoCompletingPlugin(cls) if overrides else PredictorPlugin(cls)
