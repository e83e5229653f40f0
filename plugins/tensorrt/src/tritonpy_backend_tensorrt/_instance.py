"""One model instance: its engine and execution contexts on its GPU, and ``execute``.

A batch runs like this, all on the instance's own stream:

1. each input is gathered once: device-resident inputs on this GPU (a client's
   CUDA shared memory) are bound in place, host inputs are staged in pinned
   memory (``instance.host_allocator``) and copied asynchronously into a
   buffer of the GPU's pool (``instance.device_memory``);
2. the profile is chosen and the shapes checked (``_profiles.py``),
   ``set_input_shape`` / ``set_tensor_address`` bind every tensor (shape
   tensors in host memory: ``_shapes.py``), outputs
   into pool buffers (an output whose shape depends on the data through an
   output allocator instead: ``_outputs.py``), and ``execute_async_v3``
   enqueues the engine, or a captured CUDA graph is launched when one
   matches (``_graphs.py``);
3. outputs are copied asynchronously to pinned host memory, and one event
   recorded after them is waited for (no whole-stream or device sync). An
   output whose consumer wants it on this GPU (``InferenceRequest.output_device``:
   a client's CUDA shared-memory region, an ensemble step that takes device
   inputs) is left there, in its pool buffer (a graph's is copied out of the
   graph's buffer), and handed to those requests as rows of a device tensor;
   a mixed batch gets both.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonpy_sdk import (
    DataType,
    DeviceArray,
    DeviceMemory,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    TritonError,
    gather_tensor,
    outputs_to_compute,
    scatter_device_outputs,
    wanted_on_device,
)

from ._batchio import BatchIO
from ._config import check_config, instance_group, instance_profiles, max_batch_size
from ._cuda import Cuda, PlainDeviceMemory
from ._engine import ProfileShapes, read_engine
from ._graphs import GraphKey, find_graph, graph_shapes, graph_specs
from ._outputs import OutputBuffers, allocator
from ._profiles import choose_profile
from ._runtime import TensorRT
from ._shapes import shape_outputs, shape_values

log = logging.getLogger("tritonpy.backend.tensorrt")


@dataclass(eq=False)
class _Graph:
    """A captured CUDA graph: its own context and fixed buffers."""

    exec: Any
    context: Any
    inputs: dict[str, DeviceArray]
    outputs: dict[str, DeviceArray]


@dataclass(eq=False)
class Instance:
    """What ``execute`` needs, made once by ``create``."""

    model_name: str
    name: str
    device: int
    cuda: Cuda
    engine: Any
    stream: Any
    event: Any
    memory: DeviceMemory
    pinned: Any
    batching: bool
    profiles: list[tuple[str, ProfileShapes]]
    contexts: dict[int, Any]
    input_types: dict[str, DataType]
    output_types: dict[str, DataType]
    output_names: tuple[str, ...]
    #: Every engine input: the config's, and a sequence model's controls and states (the core's).
    input_names: tuple[str, ...] = ()
    graphs: list[tuple[GraphKey, int, int, _Graph]] = field(default_factory=list)
    #: Output tensors handed out on the GPU (not copied to the host), for statistics and tests.
    device_outputs: int = 0
    #: The outputs whose staying on the GPU the log has said (once per output).
    said_on_device: set[str] = field(default_factory=set)
    #: Data-dependent outputs: what TensorRT's output allocator was given and told, and the
    #: allocator itself (``_outputs.py``); the names of such outputs seen so far.
    output_buffers: OutputBuffers | None = None
    output_allocator: Any = None
    data_dependent: set[str] = field(default_factory=set)
    #: Ragged inputs, batch_input targets and batch_output scatters (``_batchio.py``).
    batch_io: BatchIO = field(default_factory=BatchIO)
    #: Shape tensor inputs (→ the engine's numpy type for them) and outputs (``_shapes.py``).
    shape_inputs: dict[str, np.dtype[Any]] = field(default_factory=dict)
    shape_outputs: frozenset[str] = frozenset()

    @classmethod
    def create(
        cls, tensorrt: TensorRT, model_name: str, path: Any, config: dict[str, Any], instance: ModelInstance
    ) -> Instance:
        cuda = tensorrt.cuda
        assert cuda is not None
        engine = tensorrt.deserialize(model_name, path, instance.device_id)
        info = read_engine(tensorrt.trt, engine)
        group = instance_group(config, instance.name)
        chosen = instance_profiles(model_name, instance.name, group, len(info.profiles))
        check_config(model_name, config, info, [i for _, i in chosen], where=instance.name)
        stream = cuda.stream()
        event = cuda.event()
        contexts = {}
        for _, index in chosen:
            contexts[index] = _context(engine, index, stream, cuda, event, instance.name)
        state = cls(
            model_name=model_name,
            name=instance.name,
            device=instance.device_id,
            cuda=cuda,
            engine=engine,
            stream=stream,
            event=event,
            memory=instance.device_memory or PlainDeviceMemory(cuda),
            pinned=instance.host_allocator,
            batching=max_batch_size(config) > 0,
            profiles=[(name, info.profiles[index]) for name, index in chosen],
            contexts=contexts,
            input_types={i["name"]: DataType.from_config(i["data_type"]) for i in config.get("input", [])},
            output_types={o["name"]: DataType.from_config(o["data_type"]) for o in config.get("output", [])},
            output_names=tuple(t.name for t in info.outputs),
            input_names=tuple(t.name for t in info.inputs),
            batch_io=BatchIO.from_config(config),
            shape_inputs={
                t.name: np.dtype(np.int32 if t.data_type == "INT32" else np.int64)
                for t in info.inputs
                if t.is_shape_tensor
            },
            shape_outputs=frozenset(t.name for t in info.outputs if t.is_shape_tensor),
        )
        state.output_buffers = OutputBuffers(state.memory, state.device)
        state.output_allocator = allocator(tensorrt.trt, state.output_buffers)
        try:
            state._capture_graphs(config)
        except BaseException:
            state.close()
            raise
        return state

    # ---- execution -----------------------------------------------------------------------------

    def execute(self, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
        if len(requests) > 1 and (
            not self.batching or not _same_tails(requests, self.batch_io.ragged, self.shape_inputs)
        ):
            return [self.execute([r])[0] for r in requests]
        self.cuda.set_device(self.device)  # this worker thread's current GPU
        held: list[Any] = []  # host and device memory in use until the event is waited for
        try:
            feeds: dict[str, tuple[tuple[int, ...], int, int, bool]] = {}  # shape, address, nbytes, on device
            for name in self.input_names:
                if name in self.shape_inputs:
                    continue  # below, once the batch size is known
                fed = self.batch_io.host_input(requests, name) if self.batch_io else None
                if fed is not None:  # a ragged input, flat; a batch_input target
                    target = self.batch_io.inputs.get(name)
                    staged = self._staged(fed, target.datatype if target else self.input_types[name], False)
                    held.append(staged)
                    feeds[name] = (tuple(staged.shape), staged.ctypes.data, staged.nbytes, False)
                    continue
                tensor = gather_tensor(requests, name, device_memory=self.memory, allocator=self.pinned)
                datatype = self.input_types.get(name) or tensor.datatype
                device = tensor.device
                if device is not None and tensor.is_device and device.device_id == self.device:
                    held.append(device)
                    feeds[name] = (device.shape, device.address, device.nbytes, True)
                    continue
                staged = self._staged(tensor.data, datatype, gathered=len(requests) > 1)
                held.append(staged)
                feeds[name] = (tuple(staged.shape), staged.ctypes.data, staged.nbytes, False)
            shapes = {name: f[0] for name, f in feeds.items()}
            rows = shapes[next(iter(shapes))][0] if shapes else sum(r.batch_size for r in requests)
            values = {  # shape tensor inputs, in host memory: the batch size, then the values
                name: self._host(shape_values(requests, name, rows if self.batching else None, dtype))
                for name, dtype in self.shape_inputs.items()
            }
            given = {name: tuple(int(v) for v in array) for name, array in values.items()}
            _, profile = choose_profile(self.name, self.profiles, shapes, given)
            wanted = outputs_to_compute(requests, self.output_names)
            batch = shapes[next(iter(shapes))][0] if self.batching and shapes else 0
            tails = tuple(s[1:] if self.batching else s for s in shapes.values())
            graphs = self.graphs and not self.batch_io  # none is captured for ragged batches
            found = find_graph(self.graphs, GraphKey(profile.index, tails), batch) if graphs else None
            shaped: dict[str, np.ndarray[Any, Any]] = {}  # shape tensor outputs, in host memory
            if found is not None:
                outputs = self._run_graph(found[0], feeds, held, wanted, batch)
            else:
                outputs = self._run(self.contexts[profile.index], feeds, held, values, shaped)
            host: dict[str, Any] = {}
            kept: dict[str, DeviceArray] = {}
            for name in wanted:
                if name in shaped:
                    continue
                array = outputs[name]
                keep, to_host = stays_on_device(requests, name, self.device, self.output_types.get(name))
                if name in self.batch_io.scatter:  # split by the requests' input shapes, on the host
                    keep, to_host = False, True
                if keep:
                    kept[name] = self._device_copy(array) if found is not None else array
                if to_host:
                    host[name] = self._to_host(array)
            self.cuda.record_and_wait(self.event, self.stream)
        except BaseException:
            self._drain()  # copies may still read what `held` keeps alive
            if self.output_buffers is not None:
                self.output_buffers.clear()
            raise
        del held
        responses = self.batch_io.scatter.responses(requests, host, self.output_types)
        for name in wanted:
            if name in shaped:
                for response, tensor in zip(
                    responses, shape_outputs(requests, name, shaped[name], self.batching, self.name)
                ):
                    response.outputs[name] = tensor
        if kept:
            self.device_outputs += scatter_device_outputs(requests, responses, kept, self.output_types)
            for name in kept.keys() - self.said_on_device:
                self.said_on_device.add(name)
                log.info(
                    "model '%s': output '%s' stays on GPU %d for the consumers that want it there "
                    "(not copied to the host)",
                    self.model_name,
                    name,
                    self.device,
                )
        return responses

    def _host(self, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """``array`` in pinned memory where there is a pool (as Triton keeps shape tensors)."""
        if self.pinned is None:
            return array
        pinned: np.ndarray[Any, Any] = self.pinned(array.shape, array.dtype)
        pinned[...] = array
        return pinned

    def _input_dtype(self, name: str) -> Any:
        datatype = self.input_types.get(name)
        return datatype.numpy_dtype if datatype is not None else np.uint8

    def _drain(self) -> None:
        """Wait for what the stream has been given, whatever failed (errors ignored)."""
        try:
            self.cuda.record_and_wait(self.event, self.stream)
        except TritonError:
            pass

    def _staged(self, array: np.ndarray[Any, Any], datatype: DataType, gathered: bool) -> Any:
        """``array`` in pinned memory (a batch gathered by ``gather_tensor`` already is, when
        the pool had room), contiguous and of the config's type."""
        dtype = datatype.numpy_dtype
        if array.dtype != dtype:
            array = array.view(dtype) if array.dtype.itemsize == dtype.itemsize else array.astype(dtype)
        if self.pinned is None or gathered:
            return np.ascontiguousarray(array)
        staged = self.pinned(array.shape, dtype)
        staged[...] = array
        return staged

    def _run(
        self,
        context: Any,
        feeds: dict[str, tuple[tuple[int, ...], int, int, bool]],
        held: list[Any],
        values: dict[str, np.ndarray[Any, Any]] | None = None,
        shaped: dict[str, np.ndarray[Any, Any]] | None = None,
    ) -> dict[str, DeviceArray]:
        """Bind and enqueue: ``feeds`` copied to the GPU where they are not on it, the shape
        tensor inputs' ``values`` bound in host memory (as TensorRT reads them); the device
        outputs returned, the shape tensor outputs put in ``shaped`` (host memory, written
        as the engine is enqueued)."""
        for name, array in (values or {}).items():
            if not context.set_input_shape(name, array.shape):
                raise TritonError.invalid_arg(
                    f"trt failed to set binding dimension to {list(array.shape)} for input '{name}' "
                    f"for {self.name}"
                )
            context.set_tensor_address(name, array.ctypes.data)
        for name, (shape, address, nbytes, on_device) in feeds.items():
            if not on_device:
                buffer = self.memory.allocate(self.device, (nbytes,), np.uint8)
                held.append(buffer)
                self.cuda.to_device(buffer.address, address, nbytes, self.stream)
                address = buffer.address
            if not context.set_input_shape(name, shape):
                raise TritonError.invalid_arg(
                    f"trt failed to set binding dimension to {list(shape)} for input '{name}' for {self.name}"
                )
            context.set_tensor_address(name, address)
        outputs = {}
        dependent = []
        for name in self.output_names:
            shape = tuple(int(d) for d in context.get_tensor_shape(name))
            if name in self.shape_outputs:
                written = self._host(np.zeros(shape, np.int64))
                context.set_tensor_address(name, written.ctypes.data)
                if shaped is not None:
                    shaped[name] = written
                held.append(written)
                continue
            if any(d < 0 for d in shape):  # known once the engine has run: TensorRT asks for memory
                dependent.append(name)
                self.data_dependent.add(name)
                context.set_output_allocator(name, self.output_allocator)
                continue
            buffer = self.memory.allocate(self.device, shape, self._output_dtype(name))
            outputs[name] = buffer
            context.set_tensor_address(name, buffer.address or 1)  # TensorRT refuses null for empty ones
        if not context.execute_async_v3(int(self.stream)):
            raise TritonError.internal(f"unable to enqueue for inference {self.name}")
        assert self.output_buffers is not None
        for name in dependent:  # their shapes are known once execute_async_v3 has returned
            outputs[name] = self.output_buffers.take(name, self._output_dtype(name), self.name)
        return outputs

    def _output_dtype(self, name: str) -> Any:
        datatype = self.output_types.get(name)
        return datatype.numpy_dtype if datatype is not None else np.uint8

    def _run_graph(
        self,
        graph: _Graph,
        feeds: dict[str, tuple[tuple[int, ...], int, int, bool]],
        held: list[Any],
        wanted: Sequence[str],
        batch: int,
    ) -> dict[str, DeviceArray]:
        for name, (_, address, nbytes, on_device) in feeds.items():
            target = graph.inputs[name].address
            if on_device:
                self.cuda.on_device(target, address, nbytes, self.stream)
            else:
                self.cuda.to_device(target, address, nbytes, self.stream)
        self.cuda.launch(graph.exec, self.stream)
        outputs = {}
        for name in wanted:
            array = graph.outputs[name]
            if self.batching and array.shape and array.shape[0] != batch:  # a padded graph: our rows
                array = array.rows(0, batch)
            outputs[name] = array
        return outputs

    def _to_host(self, array: DeviceArray) -> np.ndarray[Any, Any]:
        """``array`` copied (asynchronously) to pinned host memory."""
        shape, dtype = array.shape, array.dtype
        host = self.pinned(shape, dtype) if self.pinned is not None else np.empty(shape, dtype)
        if array.nbytes:
            self.cuda.to_host(host.ctypes.data, array.address, array.nbytes, self.stream)
        return host

    def _device_copy(self, array: DeviceArray) -> DeviceArray:
        """A graph's output copied out of its fixed buffer, which the next launch overwrites."""
        copy = self.memory.allocate(self.device, array.shape, array.dtype)
        if array.nbytes:
            self.cuda.on_device(copy.address, array.address, array.nbytes, self.stream)
        return copy

    # ---- CUDA graphs ---------------------------------------------------------------------------

    def _capture_graphs(self, config: dict[str, Any]) -> None:
        specs = graph_specs(config)
        if not specs:
            return
        if self.batch_io or self.shape_inputs or self.shape_outputs:
            log.warning(
                "model '%s': no CUDA graphs are captured for a model with ragged inputs, batch_input, "
                "batch_output or shape tensors (its batches' shapes vary with their requests)",
                self.model_name,
            )
            return
        self.cuda.set_device(self.device)
        for _, profile in self.profiles:
            opt = {name: profile.opt(name) for name in profile.shapes}
            for spec in specs:
                shapes = graph_shapes(spec, config, opt)
                if any(
                    _out_of(profile, name, shape) for name, shape in shapes.items() if name in profile.shapes
                ):
                    continue  # Triton skips a graph its profile cannot run, too
                graph = self._capture(profile.index, shapes)
                tails = tuple(s[1:] if self.batching else s for s in shapes.values())
                self.graphs.append((GraphKey(profile.index, tails), spec.lower_bound, spec.batch_size, graph))
        self.graphs.sort(key=lambda g: g[2])

    def _capture(self, index: int, shapes: dict[str, tuple[int, ...]]) -> _Graph:
        context = _context(self.engine, index, self.stream, self.cuda, self.event, self.name)
        inputs = {
            name: self.memory.allocate(self.device, shape, self._input_dtype(name))
            for name, shape in shapes.items()
        }
        feeds = {name: (shape, inputs[name].address, 0, True) for name, shape in shapes.items()}
        held: list[Any] = []
        outputs = self._run(context, feeds, held)  # TensorRT must run once before a capture
        self.cuda.record_and_wait(self.event, self.stream)
        if self.data_dependent:
            raise TritonError.unsupported(
                f"CUDA graphs cannot run model '{self.model_name}': the shape of its output "
                f"'{sorted(self.data_dependent)[0]}' depends on the data; set "
                "optimization { cuda { graphs: false } }"
            )
        self.cuda.begin_capture(self.stream)
        try:
            enqueued = context.execute_async_v3(int(self.stream))
        finally:
            graph = self.cuda.end_capture(self.stream)
        if not enqueued:
            self.cuda.destroy_graph(graph)
            raise TritonError.internal(f"unable to capture a CUDA graph for {self.name}")
        return _Graph(graph, context, inputs, outputs)

    def close(self) -> None:
        for _, _, _, graph in self.graphs:
            self.cuda.destroy_graph(graph.exec)
        self.graphs.clear()
        self.contexts.clear()
        self.cuda.destroy(self.stream, self.event)
        self.engine = None


def stays_on_device(
    requests: Sequence[InferenceRequest], name: str, device: int, datatype: DataType | None
) -> tuple[bool, bool]:
    """``(keep, host)`` for output ``name`` of a batch on GPU ``device``: whether to keep it
    there (some request's consumer wants it on that GPU) and whether to copy it to the host
    too (some request's does not). BF16 always goes to the host: DLPack, through which an
    ensemble step would read it, carries no BF16 that every framework takes."""
    if datatype is DataType.BF16:
        return False, True
    count = wanted_on_device(requests, name, device)
    return count > 0, count < len(requests)


def _context(engine: Any, index: int, stream: Any, cuda: Cuda, event: Any, where: str) -> Any:
    context = engine.create_execution_context()
    if context is None:
        raise TritonError.internal(f"unable to create TensorRT context for {where}")
    if index != 0:
        if not context.set_optimization_profile_async(index, int(stream)):
            raise TritonError.internal(
                f"Can not set the specified optimization profile {index}[{index}] for {where}"
            )
        cuda.record_and_wait(event, stream)
    return context


def _out_of(profile: ProfileShapes, name: str, shape: tuple[int, ...]) -> bool:
    low, high = profile.min(name), profile.max(name)
    return len(shape) != len(high) or any(not lo <= d <= hi for d, lo, hi in zip(shape, low, high))


def _same_tails(
    requests: Sequence[InferenceRequest],
    ragged: frozenset[str] = frozenset(),
    shape_tensors: Container[str] = frozenset(),
) -> bool:
    """Whether the requests' inputs agree beyond the batch dim (so they concatenate); a
    ragged input need not (it is fed flat), a shape tensor must hold the same values
    (its one copy holds for the batch)."""
    first = requests[0].inputs
    for r in requests[1:]:
        for name, tensor in r.inputs.items():
            if name in shape_tensors:
                if not np.array_equal(tensor.data, first[name].data):
                    return False
            elif name not in ragged and tensor.shape[1:] != first[name].shape[1:]:
                return False
    return True
