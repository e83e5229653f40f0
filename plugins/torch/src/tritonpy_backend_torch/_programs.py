"""Loading a model file onto a device, and calling it with inputs in binding order.

Three formats:

- ``model.pt``: TorchScript (``torch.jit.script`` / ``trace`` then ``save``),
  platform ``pytorch_libtorch``; loaded with ``torch.jit.load``.
- ``model.pt2`` made by ``torch.export.save``: an exported program, platform
  ``torch_aoti`` (tritonpy only); run as ``ExportedProgram.module()``.
- ``model.pt2`` made by ``torch._inductor.aoti_compile_and_package``: an
  AOTInductor package, platform ``torch_aoti``; loaded with
  ``torch._inductor.aoti_load_package`` and run on its flat inputs.

A :class:`Program` hides the difference: ``call(args)`` takes the inputs in
positional order and returns the results as a list (or a dict, for a
TorchScript model returning one), and says how config names bind to both.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import threading
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonpy_sdk import TritonError

from ._naming import bind_outputs, bind_pt2, bind_torchscript_inputs, input_convention, named_index
from ._sequence import SequenceTensors
from ._types import CONFIG_TO_TORCH

TORCHSCRIPT = "pytorch_libtorch"
PT2 = "torch_aoti"
#: Platforms this backend serves ("libtorch" is Triton's older spelling of pytorch_libtorch).
PLATFORMS = (TORCHSCRIPT, PT2, "libtorch")


@dataclass(slots=True)
class Program:
    """A model loaded on one device and how to call it."""

    #: Inputs in positional order (or a dict, for a TorchScript Dict[str, Tensor] argument) → results.
    call: Callable[[Any], Any]
    #: Config input name → position in ``call``'s argument list.
    inputs: dict[str, int]
    #: Config output name → index in the results.
    outputs: dict[str, int]
    #: The number of positional arguments ``call`` takes.
    arity: int
    #: TorchScript ``forward(self, Dict[str, Tensor])``: inputs go in one dict under their names.
    dict_input: bool = False
    #: Whether results come back as a flat list already (PT2) or need Triton's TorchScript rules.
    flat_results: bool = False
    #: Where inputs go: the instance's device, or for KIND_MODEL that of the model's parameters.
    device: Any = None
    #: What to keep alive (the module) beyond ``call``.
    module: Any = field(default=None, repr=False)


_compiler_import = threading.Lock()


def import_compiler(*modules: str) -> None:
    """Import parts of torch's compiler stack (``torch._dynamo``, ``torch.export``...) on one
    thread at a time. torch imports them lazily, and two models loading at once (the
    server loads models in parallel) can otherwise see a half-initialised
    ``torch._dynamo`` ("cannot import name ... from partially initialized module")."""
    with _compiler_import:
        for name in modules:
            importlib.import_module(name)


def require_file(path: Path, model_name: str) -> Path:
    if not path.is_file():
        raise TritonError.unavailable(f"unable to find '{path}' for model instance '{model_name}'")
    return path


def pt2_kind(path: Path) -> str:
    """``"aoti"`` for an AOTInductor package, ``"export"`` for a ``torch.export.save`` archive."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return "unknown"
    if any("/data/aotinductor/" in n or n.startswith("data/aotinductor/") for n in names):
        return "aoti"
    if any(n.endswith("models/model.json") or "/serialized_exported_program" in n for n in names):
        return "export"
    return "unknown"


# -- TorchScript -------------------------------------------------------------------------


def load_torchscript(
    torch: Any,
    path: Path,
    model_name: str,
    config: dict[str, Any],
    device: Any,
    kind: str,
    log: logging.Logger,
    loaded: Any = None,
) -> Program:
    """A TorchScript module on ``device`` (as saved, for KIND_MODEL), checked against the config."""
    if loaded is None:
        try:
            loaded = torch.jit.load(str(path)) if kind == "KIND_MODEL" else torch.jit.load(str(path), device)
        except Exception as exc:  # torch raises RuntimeError and others for files it cannot read
            raise TritonError.internal(f"failed to load model '{model_name}': {exc}") from None
    module = loaded
    module.eval()
    sequence = SequenceTensors.of(config)
    controls = sequence.control_indices()
    sequence.check_control_types(CONFIG_TO_TORCH)
    schema = module.forward.schema
    arguments = list(schema.arguments)
    if arguments and arguments[0].type.kind() == "ClassType":
        arguments = arguments[1:]
    config_inputs = [str(i["name"]) for i in config.get("input", [])]
    # Triton's batch_input targets are arguments too, after the config's inputs.
    input_names = config_inputs + batch_input_targets(config)
    expected = len(input_names) + len(sequence.inputs)
    dict_input = len(arguments) == 1 and arguments[0].type.kind() == "DictType"
    if not dict_input:
        for arg in arguments[1:]:
            if arg.type.kind() == "DictType":
                raise TritonError.internal(
                    "Multiple inputs of kind DictType were detected. Only a single input of type "
                    "Dict(str, Tensor) is supported."
                )
        for arg in arguments:
            if arg.type.kind() not in ("TensorType", "ListType"):
                raise TritonError.internal(
                    f"An input of type '{arg.type}' was detected in the model. Only a single input of "
                    "type Dict(str, Tensor) or input(s) of type Tensor are supported."
                )
        if len(arguments) != expected:
            raise TritonError.invalid_arg(
                f"unable to load model '{model_name}', configuration expects {expected} inputs, "
                f"model provides {len(arguments)}"
            )
    if not config_inputs:
        raise TritonError.internal(
            "model configuration must contain at least one input, none were specified."
        )
    output_names = _config_output_names(config)
    argument_names = [a.name for a in arguments]
    sequence.check_states(
        model_name,
        input_convention(config_inputs, argument_names) == "index",
        all(named_index(n) is not None for n in output_names),
    )
    if dict_input:
        # Every input goes in the one dict under its name: the core's sequence tensors too.
        inputs = {n: i for i, n in enumerate([*input_names, *(t.name for t in sequence.inputs)])}
    else:
        fixed = {**controls, **sequence.state_input_indices()}
        inputs = bind_torchscript_inputs(model_name, input_names, argument_names, log, fixed)
    outputs = bind_outputs(model_name, output_names, log)
    outputs.update(sequence.state_output_indices(output_names))
    return Program(
        call=module.forward,
        inputs=inputs,
        outputs=outputs,
        arity=len(arguments),
        dict_input=dict_input,
        device=_module_device(torch, module) if kind == "KIND_MODEL" else device,
        module=module,
    )


def _config_output_names(config: dict[str, Any]) -> list[str]:
    names = [str(o["name"]) for o in config.get("output", [])]
    if not names:
        raise TritonError.internal(
            "model configuration must contain at least one output, none were specified."
        )
    return names


def _module_device(torch: Any, module: Any) -> Any:
    """KIND_MODEL: the device of the model's first parameter (or buffer); CPU when it has none."""
    for tensors in (module.parameters(), module.buffers()):
        for t in tensors:
            return t.device
    return torch.device("cpu")


def torchscript_results(torch: Any, result: Any) -> list[Any] | dict[str, Any]:
    """A TorchScript ``forward()`` result as Triton reads it: its outputs, in order."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, tuple):
        for index, item in enumerate(result):
            if isinstance(item, list) and not all(isinstance(s, str) for s in item):
                raise TritonError.internal(
                    f"output at index {index} must be of type Tensor or List[str], received "
                    f"List[{_element_type(item)}]"
                )
        return list(result)
    if isinstance(result, list):
        if all(isinstance(s, str) for s in result):
            return [result]
        if all(isinstance(t, torch.Tensor) for t in result):  # beyond Triton: a list of tensors
            return list(result)
        raise TritonError.internal(
            f"output must be of type Tensor or List[str], received List[{_element_type(result)}]"
        )
    if isinstance(result, dict):  # beyond Triton: outputs by key
        return {str(k): v for k, v in result.items()}
    raise TritonError.internal(
        "output must be of type Tensor, List[str] or Tuple containing one of these two types. It "
        "should not be a List / Dictionary of Tensors or a Scalar"
    )


def _element_type(items: list[Any]) -> str:
    for item in items:
        if not isinstance(item, str):
            return type(item).__name__
    return "str"


# -- PT2: exported programs and AOTInductor packages ---------------------------------------------


def leaf_names(pytree: Any, spec: Any, root: str) -> list[str]:
    """The call-structure name of each leaf of ``spec``: ``ARGS[0]``, ``KWARGS[k]``, ``RESULT[a][1]``."""
    count = spec.num_leaves
    structure = pytree.tree_unflatten(list(range(count)), spec)
    names = [""] * count
    for path, leaf in pytree.tree_flatten_with_path(structure)[0]:
        names[leaf] = root + "".join(f"[{_key_text(k)}]" for k in path)
    return names


def _key_text(key: Any) -> str:
    for attr in ("idx", "key", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def input_leaf_names(pytree: Any, in_spec: Any) -> list[str]:
    """Input leaves of an ``(args, kwargs)`` spec named ``ARGS[...]`` / ``KWARGS[...]``."""
    names = leaf_names(pytree, in_spec, "")
    out = []
    for name in names:
        # "[0][i]..." is args[i]; "[1][k]..." is kwargs[k].
        if name.startswith("[0]"):
            out.append("ARGS" + name[3:])
        elif name.startswith("[1]"):
            out.append("KWARGS" + name[3:])
        else:
            out.append(name)
    return out


def argument_aliases(forward: Callable[..., Any], leaves: Sequence[str]) -> dict[str, int]:
    """``forward()``'s argument names for the leaves that are whole top-level arguments."""
    try:
        params = [p for p in inspect.signature(forward).parameters.values() if p.name != "self"]
    except (TypeError, ValueError):
        return {}
    aliases: dict[str, int] = {}
    for index, param in enumerate(params):
        for leaf, name in enumerate(leaves):
            if name in (f"ARGS[{index}]", f"KWARGS[{param.name}]"):
                aliases[param.name] = leaf
    return aliases


def load_exported(torch: Any, path: Path, model_name: str) -> Any:
    import_compiler("torch._dynamo", "torch.export")
    try:
        return torch.export.load(str(path))
    except Exception as exc:  # torch raises many types for archives it cannot read
        raise TritonError.internal(f"failed to load model '{model_name}': {exc}") from None


def exported_program(
    torch: Any, ep: Any, model_name: str, config: dict[str, Any], device: Any, kind: str
) -> Program:
    """An exported program's module on ``device``, bound to the config's names."""
    import torch.utils._pytree as pytree

    if kind != "KIND_MODEL" and str(device) != "cpu":
        move = getattr(getattr(torch.export, "passes", None), "move_to_device_pass", None)
        ep = move(ep, device) if move is not None else ep
    module = ep.module()
    if kind != "KIND_MODEL":
        module = module.to(device)
    in_spec, out_spec = ep.call_spec.in_spec, ep.call_spec.out_spec
    leaves_in = input_leaf_names(pytree, in_spec)
    leaves_out = leaf_names(pytree, out_spec, "RESULT")
    names_in, names_out = call_names(config)
    _check_counts(model_name, names_in, leaves_in)
    inputs = bind_pt2(model_name, "input", names_in, leaves_in, argument_aliases(module.forward, leaves_in))
    outputs = bind_pt2(model_name, "output", names_out, leaves_out)

    def call(flat: list[Any]) -> list[Any]:
        args, kwargs = pytree.tree_unflatten(flat, in_spec)
        return list(pytree.tree_flatten(module(*args, **kwargs))[0])

    return Program(
        call=call,
        inputs=inputs,
        outputs=outputs,
        arity=len(leaves_in),
        flat_results=True,
        device=_module_device(torch, module) if kind == "KIND_MODEL" else device,
        module=module,
    )


def load_aoti(
    torch: Any, path: Path, model_name: str, config: dict[str, Any], device: Any, kind: str
) -> Program:
    """An AOTInductor package for ``device``'s kind, bound to the config's names."""
    import torch.utils._pytree as pytree

    import_compiler("torch._dynamo", "torch.export", "torch._inductor")
    loader_fn = getattr(getattr(torch, "_inductor", None), "aoti_load_package", None)
    if loader_fn is None:
        raise TritonError.unsupported(
            f"model '{model_name}' is an AOTInductor package: it needs torch >= 2.6 "
            f"(this is torch {torch.__version__})"
        )
    try:
        if str(device).startswith("cuda"):
            compiled = loader_fn(str(path), device_index=device.index or 0)
        else:
            compiled = loader_fn(str(path))
    except Exception as exc:  # torch raises RuntimeError and others for packages it cannot load
        raise TritonError.internal(f"failed to load model '{model_name}': {exc}") from None
    loader = compiled.loader
    compiled_for = str(loader.get_metadata().get("AOTI_DEVICE_KEY", "cpu"))
    wanted = "cpu" if kind == "KIND_CPU" or (kind == "KIND_MODEL" and compiled_for == "cpu") else "cuda"
    if compiled_for != wanted:
        raise TritonError.invalid_arg(
            f"unable to load model '{model_name}': {path.name} was compiled for {compiled_for} but the "
            f"instance runs on {wanted} ({kind}); compile the package for the instance's device"
        )
    in_spec_text, out_spec_text = loader.get_call_spec()
    in_spec = pytree.treespec_loads(in_spec_text)
    out_spec = pytree.treespec_loads(out_spec_text)
    leaves_in = input_leaf_names(pytree, in_spec)
    leaves_out = leaf_names(pytree, out_spec, "RESULT")
    names_in, names_out = call_names(config)
    _check_counts(model_name, names_in, leaves_in)
    inputs = bind_pt2(model_name, "input", names_in, leaves_in)
    outputs = bind_pt2(model_name, "output", names_out, leaves_out)
    run = loader.run

    def call(flat: list[Any]) -> list[Any]:
        return list(run(flat))

    run_device = torch.device("cpu") if compiled_for == "cpu" else device
    return Program(
        call=call,
        inputs=inputs,
        outputs=outputs,
        arity=len(leaves_in),
        flat_results=True,
        device=run_device,
        module=compiled,
    )


def call_names(config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The names a program's inputs and outputs are bound to (PT2 programs by ordinal or
    path, the Python-based runtime's modules by position): the config's, and a sequence
    model's controls, state inputs and state outputs."""
    sequence = SequenceTensors.of(config)
    names_in = [str(i["name"]) for i in config.get("input", [])] + [t.name for t in sequence.inputs]
    names_out = [str(o["name"]) for o in config.get("output", [])]
    names_out += [t.name for t in sequence.state_outputs if t.name not in names_out]
    return names_in, names_out


def batch_input_targets(config: dict[str, Any]) -> list[str]:
    """The config's ``batch_input`` targets, in order: arguments after its inputs."""
    return [str(t) for b in config.get("batch_input", []) for t in b.get("target_name", [])]


def _check_counts(model_name: str, names: list[str], leaves: list[str]) -> None:
    if len(names) != len(leaves):
        raise TritonError.invalid_arg(
            f"unable to load model '{model_name}', configuration expects {len(names)} inputs, "
            f"model provides {len(leaves)}"
        )
