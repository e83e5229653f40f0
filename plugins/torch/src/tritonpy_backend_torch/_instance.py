"""One model instance: its program on its device, and ``execute``.

A batch of requests runs as one call: each input is gathered along the batch
dimension, handed to torch without a copy (DLPack), and only the outputs some
request asked for are read back, as numpy views of the result tensors where
they are contiguous.

On a GPU the execution does what calling the module directly does, plus the
unavoidable batching and scatter, all on the instance's own CUDA stream:

- each request's rows of an input are copied from where they lie (request
  bodies, shared memory: pageable host memory) straight into one device tensor,
  in one call that gives the GIL up once; there is no host gather, so no Python
  thread of the server waits for one (bench/gpu.md measured pinned staging
  gathered under the GIL, and torch.cat, against it);
- each output is copied back asynchronously into pinned memory (torch's
  ``.to("cpu", non_blocking=True)``), and the stream is synchronised once,
  after the last copy (never the whole device); every source of a copy stays
  referenced until then, on the error path too;
- an input already on the instance's GPU (a client's CUDA shared-memory region)
  is taken with ``torch.from_dlpack`` in place; a batch of them is gathered on
  the device by the core (a copy on the legacy default stream, which the
  instance's stream waits for);
- an output that every request of the batch wants on the instance's GPU
  (``InferenceRequest.output_device``: a client's CUDA shared-memory region, a
  later ensemble step that takes device inputs there) is never copied to the
  host: each request gets its rows of the result tensor in place, as a device
  tensor that keeps the torch tensor alive (``scatter_device_outputs``), handed
  out after the stream is synchronised (the core copies it on another stream).
  In a mixed batch the result is copied to the host as usual as well, and each
  request gets it where its consumer wants it. Strings and BF16 always go to the
  host (DLPack carries no BF16 that every reader takes).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonpy_sdk import (
    BatchOutputs,
    DataType,
    DeviceArray,
    DeviceMemory,
    InferenceRequest,
    InferenceResponse,
    TritonError,
    batch_arrays,
    batch_input_array,
    gather_inputs,
    gather_ragged,
    gather_tensor,
    outputs_to_compute,
    scatter_device_outputs,
    wanted_on_device,
)

from ._params import Options, apply_execution_switches
from ._programs import Program, torchscript_results
from ._sequence import SequenceTensor, SequenceTensors
from ._types import CONFIG_TO_TORCH, config_type, to_numpy, to_torch, torch_dtype


@dataclass(slots=True)
class InputSpec:
    name: str
    position: int
    string: bool
    bf16: bool
    ragged: bool = False
    #: Batch inputs are made by the backend from the requests (Triton's batch_input).
    batch_kind: str = ""
    batch_sources: tuple[str, ...] = ()
    batch_dtype: Any = None


@dataclass(slots=True)
class OutputSpec:
    name: str
    index: int
    datatype: DataType
    config_type: str
    string: bool


@dataclass(slots=True)
class InstanceState:
    """What ``execute`` needs for one instance, computed once at load."""

    torch: Any
    model_name: str
    program: Program
    options: Options
    batching: bool
    inputs: list[InputSpec]
    outputs: dict[str, OutputSpec]
    on_gpu: bool
    stream: Any = None
    #: How many output tensors this instance handed out on its GPU (never through the host).
    device_outputs: int = 0
    #: Where the first output of each name handed out on the GPU is said (once: not per batch).
    log: logging.Logger | None = None
    #: The outputs said so far.
    said_on_device: set[str] = field(default_factory=set)
    #: Outputs written flat for the whole batch, cut back by the requests' input shapes.
    batch_outputs: BatchOutputs = field(default_factory=BatchOutputs)
    #: Each output's data type, and the outputs in config order (derived from ``outputs``).
    output_types: dict[str, DataType] = field(init=False)
    output_names: tuple[str, ...] = field(init=False)
    #: The GPU of a GPU instance (torch's device index), else None: where outputs may stay.
    gpu: int | None = field(init=False)

    def __post_init__(self) -> None:
        self.output_types = {name: spec.datatype for name, spec in self.outputs.items()}
        self.output_names = tuple(self.outputs)
        device = self.program.device
        self.gpu = None
        if self.on_gpu:
            index = getattr(device, "index", None)
            self.gpu = int(index) if index is not None else int(self.torch.cuda.current_device())

    @classmethod
    def create(
        cls,
        torch: Any,
        model_name: str,
        config: dict[str, Any],
        program: Program,
        options: Options,
        log: logging.Logger | None = None,
    ) -> InstanceState:
        batching = int(config.get("max_batch_size", 0) or 0) > 0
        inputs: list[InputSpec] = []
        for entry in config.get("input", []):
            name = str(entry["name"])
            data_type = str(entry.get("data_type", "TYPE_INVALID"))
            _check_type(torch, model_name, "input", name, data_type, entry, batching)
            inputs.append(
                InputSpec(
                    name,
                    program.inputs[name],
                    data_type == "TYPE_STRING",
                    data_type == "TYPE_BF16",
                    ragged=bool(entry.get("allow_ragged_batch")),
                )
            )
        sequence = SequenceTensors.of(config)
        sequence.check_control_types(CONFIG_TO_TORCH)
        for tensor in sequence.state_inputs:
            _check_state_type(torch, model_name, "input state", tensor)
        for tensor in sequence.inputs:
            inputs.append(
                InputSpec(
                    tensor.name,
                    program.inputs[tensor.name],
                    tensor.data_type == "TYPE_STRING",
                    tensor.data_type == "TYPE_BF16",
                )
            )
        position = len(inputs)
        for batch_input in config.get("batch_input", []):
            for target in batch_input.get("target_name", []):
                inputs.append(
                    InputSpec(
                        target,
                        program.inputs.get(target, position),
                        string=False,
                        bf16=False,
                        batch_kind=str(batch_input.get("kind", "BATCH_ELEMENT_COUNT")),
                        batch_sources=tuple(batch_input.get("source_input", [])),
                        batch_dtype=DataType.from_config(
                            batch_input.get("data_type", "TYPE_FP32")
                        ).numpy_dtype,
                    )
                )
                position += 1
        outputs: dict[str, OutputSpec] = {}
        for entry in config.get("output", []):
            name = str(entry["name"])
            data_type = str(entry.get("data_type", "TYPE_INVALID"))
            _check_type(torch, model_name, "output", name, data_type, entry, batching)
            outputs[name] = OutputSpec(
                name,
                program.outputs[name],
                DataType.from_config(data_type),
                data_type,
                data_type == "TYPE_STRING",
            )
        for tensor in sequence.state_outputs:
            if tensor.name in outputs:  # also a config output (a client may ask for it): bound there
                continue
            _check_state_type(torch, model_name, "state", tensor)
            if tensor.data_type == "TYPE_STRING" and len(tensor.dims) + (1 if batching else 0) > 1:
                raise TritonError.internal(
                    f"Triton only supports 1 dimensional List of String as output for '{tensor.name}' "
                    f"for model '{model_name}'"
                )
            outputs[tensor.name] = OutputSpec(
                tensor.name,
                program.outputs[tensor.name],
                DataType.from_config(tensor.data_type),
                tensor.data_type,
                tensor.data_type == "TYPE_STRING",
            )
        device = program.device
        on_gpu = device is not None and str(device).startswith("cuda")
        stream = torch.cuda.Stream(device=device) if on_gpu else None
        return cls(
            torch,
            model_name,
            program,
            options,
            batching,
            inputs,
            outputs,
            on_gpu,
            stream,
            log=log,
            batch_outputs=BatchOutputs.from_config(config),
        )

    # -- execute ---------------------------------------------------------------------------------

    def execute(
        self,
        requests: Sequence[InferenceRequest],
        device_memory: DeviceMemory | None = None,
    ) -> list[InferenceResponse]:
        if len(requests) > 1 and not self.batching:
            return [self.execute([r], device_memory)[0] for r in requests]
        torch = self.torch
        wanted = outputs_to_compute(requests, self.output_names)
        apply_execution_switches(torch, self.options)
        with torch.inference_mode(self.options.inference_mode), torch.no_grad():
            if self.stream is not None:
                with torch.cuda.stream(self.stream):
                    arrays, held = self._run(requests, wanted, device_memory)
            else:
                arrays, held = self._run(requests, wanted, device_memory)
        if self.options.cache_cleaning and self.on_gpu:
            torch.cuda.empty_cache()
        responses = self.batch_outputs.responses(requests, arrays, self.output_types)
        if held:
            self.device_outputs += scatter_device_outputs(requests, responses, held, self.output_types)
            if not self.said_on_device.issuperset(held):
                self._say_on_device(held)
        return responses

    def _say_on_device(self, held: dict[str, DeviceArray]) -> None:
        for name in sorted(set(held) - self.said_on_device):
            self.said_on_device.add(name)
            if self.log is not None:
                self.log.info(
                    "model '%s': output '%s' stays on GPU %d for the consumers that want it there "
                    "(not copied to the host)",
                    self.model_name,
                    name,
                    held[name].device_id,
                )

    def stays_on_device(self, requests: Sequence[InferenceRequest], name: str) -> tuple[bool, bool]:
        """``(keep, host)`` for output ``name`` of a batch: whether to keep the result on
        the instance's GPU (some request wants it there), and whether to copy it to the
        host too (some request does not). A CPU instance, and strings and BF16, always
        ``(False, True)``."""
        gpu = self.gpu
        if gpu is None:
            return False, True
        spec = self.outputs[name]
        if spec.string or spec.datatype is DataType.BF16 or name in self.batch_outputs:
            return False, True
        count = wanted_on_device(requests, name, gpu)
        return count > 0, count < len(requests)

    def _run(
        self,
        requests: Sequence[InferenceRequest],
        wanted: list[str],
        device_memory: DeviceMemory | None,
    ) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, DeviceArray]]:
        """The batch's ``wanted`` outputs: in host memory, and on the instance's GPU
        (those some request wants there: ``stays_on_device``)."""
        #: Host memory the stream's copies read: referenced until the stream is synchronised.
        staged: list[Any] = []
        synced = False
        try:
            args = self._arguments(requests, device_memory, staged)
            results = self._forward(args)
            host, kept = self._outputs(results, wanted, requests)
            if self.on_gpu:
                self.stream.synchronize()  # the one wait: copies up, forward, copies down
            synced = True
            arrays = {name: self._to_array(self.outputs[name], value) for name, value in host.items()}
            return arrays, self._device_arrays(kept, arrays)
        finally:
            if self.on_gpu and not synced:
                # A failure after copies were queued: let them finish before their sources
                # are released (and their memory reused).
                self.stream.synchronize()
            staged.clear()

    def _device_arrays(
        self, kept: dict[str, Any], arrays: dict[str, np.ndarray[Any, Any]]
    ) -> dict[str, DeviceArray]:
        """The tensors ``kept`` on the GPU as ``DeviceArray``s, once the stream is
        synchronised (ready on every stream; the torch tensor stays alive as the
        array's owner). One DLPack cannot carry goes to ``arrays`` (the host) instead."""
        held: dict[str, DeviceArray] = {}
        for name, value in kept.items():
            try:
                held[name] = DeviceArray.from_dlpack(value)
            except (BufferError, ValueError):
                if name not in arrays:
                    arrays[name] = self._to_array(self.outputs[name], value.cpu())
        return held

    def _forward(self, args: Any) -> list[Any] | dict[str, Any]:
        """The program called on its arguments; its results as Triton reads them."""
        program = self.program
        try:
            result = program.call(args) if program.dict_input or program.flat_results else program.call(*args)
        except TritonError:
            raise
        except Exception as exc:  # the model's own failure: Triton's wording, never a crash
            raise TritonError.internal(f"PyTorch execute failure: {_first_line(exc)}") from None
        return result if program.flat_results else torchscript_results(self.torch, result)

    def _arguments(
        self,
        requests: Sequence[InferenceRequest],
        device_memory: DeviceMemory | None,
        staged: list[Any],
    ) -> Any:
        torch = self.torch
        device = self.program.device
        values: list[Any] = [None] * self.program.arity
        named: dict[str, Any] = {}
        for spec in self.inputs:
            ragged = spec.ragged and len(requests) > 1
            host_only = spec.string or spec.batch_kind or ragged
            held = None if host_only else _device_input(requests, spec.name, device_memory)
            value: Any
            if held is not None:  # in place: torch reads the memory where it lies
                value = torch.from_dlpack(held)
                if self.on_gpu and len(requests) > 1 and value.device.type == "cuda":
                    # Gathered by the core on the legacy default stream (which the core waits
                    # for; this keeps the order should a device-memory manager not).
                    self.stream.wait_stream(torch.cuda.default_stream(value.device))
                if device is not None and value.device != device:
                    value = value.to(device)
            elif self.on_gpu and not host_only and device is not None:
                value = self._to_device(spec, requests, staged)
            else:
                value = self._host_value(spec, requests)
            if self.program.dict_input:
                named[spec.name] = value
            else:
                values[spec.position] = value
        return named if self.program.dict_input else values

    def _to_device(self, spec: InputSpec, requests: Sequence[InferenceRequest], staged: list[Any]) -> Any:
        """Input ``spec`` of the batch on the instance's GPU: each request's rows copied from
        where they lie into one device tensor, queued on the instance's stream in one call
        that gives the GIL up once (``torch._foreach_copy_``). No host gather: from pageable
        memory (request bodies, system shared memory) the driver stages each copy and returns
        when its source has been read, as the direct call's ``.to(device)`` does; a source in
        pinned memory is read asynchronously, so ``staged`` keeps every source referenced
        until the stream is synchronised."""
        torch = self.torch
        device = self.program.device
        sources = [to_torch(torch, a, spec.bf16) for a in batch_arrays(requests, spec.name)]
        staged.extend(sources)
        if len(sources) == 1:
            return sources[0].to(device, non_blocking=True)
        first = sources[0]
        rows = sum(s.shape[0] for s in sources)
        value = torch.empty((rows, *first.shape[1:]), dtype=first.dtype, device=device)
        targets = value.split([s.shape[0] for s in sources])  # each request's rows, as views
        copy_all = getattr(torch, "_foreach_copy_", None)
        if copy_all is not None:
            copy_all(targets, sources, non_blocking=True)
        else:  # torch without it: one call (and one GIL release) per request
            for target, source in zip(targets, sources):
                target.copy_(source, non_blocking=True)
        return value

    def _host_value(self, spec: InputSpec, requests: Sequence[InferenceRequest]) -> Any:
        """Input ``spec`` gathered in host memory, as torch takes it: every input of a CPU
        instance, and on a GPU strings, batch inputs and ragged batches (small: copied up
        synchronously from where they lie)."""
        torch = self.torch
        device = self.program.device
        if spec.batch_kind:
            array = batch_input_array(spec.batch_kind, requests, spec.batch_sources, spec.batch_dtype)
        elif len(requests) == 1:
            array = requests[0].inputs[spec.name].data
        elif spec.ragged:
            array = gather_ragged(requests, spec.name)
        else:
            array = gather_inputs(requests, spec.name)
        if spec.string:
            return [_text(v) for v in array.reshape(-1)]
        value = to_torch(torch, array, spec.bf16)
        if device is not None and value.device != device:
            value = value.to(device)
        return value

    def _outputs(
        self, results: list[Any] | dict[str, Any], wanted: list[str], requests: Sequence[InferenceRequest]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ``wanted`` results on their way to the host (GPU results: copies queued on the
        instance's stream, read only after it is synchronised), and those kept on the
        instance's GPU (contiguous torch tensors) for the requests that want them there."""
        values = list(results.values()) if isinstance(results, dict) else results
        host: dict[str, Any] = {}
        kept: dict[str, Any] = {}
        for name in wanted:
            spec = self.outputs[name]
            if isinstance(results, dict) and name in results:
                value = results[name]
            elif spec.index < len(values):
                value = values[spec.index]
            else:
                raise TritonError.invalid_arg(
                    f"The output {name} in the model configuration refers to an output index which "
                    f"doesn't exist. This model has {len(values)} outputs"
                )
            if self.gpu is not None:
                keep, to_host = self.stays_on_device(requests, name)
                if keep and self._on_own_gpu(spec, value):
                    kept[name] = value.contiguous()  # (on the instance's stream: ordered)
                    if not to_host:
                        continue
            host[name] = self._output(spec, value)
        return host, kept

    def _on_own_gpu(self, spec: OutputSpec, value: Any) -> bool:
        """Whether ``value`` is a tensor of the configured type on the instance's GPU
        (anything else takes the host path, which checks it and says what is wrong)."""
        torch = self.torch
        return (
            isinstance(value, torch.Tensor)
            and value.device == self.program.device
            and value.dim() > 0
            and config_type(value.dtype) == spec.config_type
        )

    def _output(self, spec: OutputSpec, value: Any) -> Any:
        torch = self.torch
        if isinstance(value, torch.Tensor):
            provided = config_type(value.dtype)
            if spec.string or provided != spec.config_type:
                raise TritonError.invalid_arg(
                    f"configuration expects datatype {spec.config_type} for output '{spec.name}', "
                    f"model provides {provided}"
                )
            if value.dim() == 0:
                raise TritonError.invalid_arg(f"output '{spec.name}' is a scalar which is not supported.")
            if value.device.type != "cpu":
                if value.device != self.program.device:
                    return value.cpu()  # another GPU's stream (KIND_MODEL): this one copy waits
                # Into pinned memory (torch pins the target of a non-blocking copy to the host),
                # queued on the instance's stream; read after the one synchronisation.
                return value.to("cpu", non_blocking=True)
            return value
        if isinstance(value, list) and all(isinstance(s, str) for s in value):
            if not spec.string:
                raise TritonError.invalid_arg(
                    f"configuration expects datatype {spec.config_type} for output '{spec.name}', "
                    "model provides TYPE_STRING"
                )
            return value
        raise TritonError.invalid_arg(f"output '{spec.name}' must be of type Tensor or List[str].")

    def _to_array(self, spec: OutputSpec, value: Any) -> np.ndarray[Any, Any]:
        if isinstance(value, list):
            out = np.empty(len(value), dtype=object)
            out[:] = [s.encode("utf-8") for s in value]
            return out
        return to_numpy(self.torch, value, DataType.BF16.numpy_dtype)


def _check_type(
    torch: Any, model: str, kind: str, name: str, data_type: str, entry: dict[str, Any], batching: bool
) -> None:
    if data_type == "TYPE_STRING":
        reshape = entry.get("reshape")
        dims = reshape.get("shape", []) if reshape else entry.get("dims", [])
        if len(dims) + (1 if batching else 0) > 1:
            raise TritonError.internal(
                f"Triton only supports 1 dimensional List of String as {kind} for '{name}' "
                f"for model '{model}'"
            )
        return
    if torch_dtype(torch, data_type) is None:
        raise TritonError.internal(
            f"unsupported datatype {data_type} for {kind} '{name}' for model '{model}'"
        )


def _check_state_type(torch: Any, model: str, kind: str, tensor: SequenceTensor) -> None:
    """A state tensor's type against torch's (STRING travels as a list), in Triton's words."""
    if tensor.data_type == "TYPE_STRING" or torch_dtype(torch, tensor.data_type) is not None:
        return
    raise TritonError.internal(
        f"unsupported datatype {tensor.data_type} for {kind} '{tensor.name}' for model '{model}'"
    )


def _device_input(
    requests: Sequence[InferenceRequest], name: str, memory: DeviceMemory | None
) -> DeviceArray | None:
    """Input ``name`` as one array where it lies when every request holds it in
    memory torch can read in place (one GPU, or host memory through DLPack);
    None when it is gathered on the host as usual."""
    tensors = [r.inputs[name] for r in requests if name in r.inputs]
    if len(tensors) != len(requests) or any(t.device is None for t in tensors):
        return None
    if len(tensors) == 1:
        return tensors[0].device
    if memory is None or not all(t.is_device and t.device_id == tensors[0].device_id for t in tensors):
        return None
    return gather_tensor(requests, name, device_memory=memory).device


def _first_line(exc: BaseException) -> str:
    """A TorchScript error's message without the interpreter's traceback of the scripted code."""
    text = str(exc).strip()
    marker = "The following operation failed in the TorchScript interpreter."
    if marker in text:
        # torch.jit errors end with "RuntimeError: <the model's own message>" after the traceback.
        tail = text.rsplit("\n", 1)[-1].strip()
        return tail or text
    return text


def _text(value: Any) -> str:
    """A BYTES element as the ``str`` a TorchScript ``List[str]`` holds."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
