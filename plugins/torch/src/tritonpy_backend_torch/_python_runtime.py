"""Triton's Python-based PyTorch runtime: ``backend: "pytorch"`` with ``runtime: "model.py"``.

The version folder holds a ``model.py`` that defines a ``torch.nn.Module``
subclass, with its weights (a ``state_dict`` saved by ``torch.save``) in a
``model.pt`` beside it, or holds only a TorchScript ``model.pt``. As Triton's
runtime (the PyTorch backend's ``src/model.py``) does:

- the file is ``default_model_filename`` when the config names one, else
  ``model.py``, else ``model.pt``; the weights of ``<name>.py`` are
  ``<name>.pt`` when there is one;
- the class is instantiated without arguments on the instance's device
  (``KIND_GPU``: ``cuda:<id>``; ``KIND_CPU``: the CPU; ``KIND_MODEL``: where
  its first parameter is), given its weights, put in eval mode and wrapped in
  ``torch.compile`` with the JSON object of ``TORCH_COMPILE_OPTIONAL_PARAMETERS``
  as keyword arguments; a TorchScript file is loaded as it is, not compiled;
- ``forward()`` takes the config's inputs positionally, in the config's order,
  and its results (a tensor, or a tuple or list of them) are the config's
  outputs in the config's order.

Triton runs this runtime in a Python-backend stub process; here the module runs
in the server through this backend's execution path, so batching, strings,
sequences, device outputs and statistics behave as for TorchScript models.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tritonpy_sdk import TritonError

from ._programs import Program, batch_input_targets, call_names, import_compiler

#: The config's ``runtime`` that selects this runtime.
RUNTIME = "model.py"
#: The files looked for in the version folder, after the config's ``default_model_filename``.
FILES = ("model.py", "model.pt")
#: The parameter whose JSON object holds ``torch.compile``'s keyword arguments.
COMPILE_PARAMETERS = "TORCH_COMPILE_OPTIONAL_PARAMETERS"

_counter = itertools.count()


def uses_python_runtime(config: dict[str, Any]) -> bool:
    return str(config.get("runtime") or "") == RUNTIME


def model_file(version_path: Path, config: dict[str, Any]) -> Path:
    """The model file Triton's runtime picks in ``version_path``."""
    names = list(FILES)
    named = str(config.get("default_model_filename") or "")
    if named:
        names.insert(0, named)
    for name in names:
        path = version_path / name
        if path.exists():
            return path
    raise TritonError.unavailable(f"No model found in {version_path}/{names}")


def compile_options(params: dict[str, str], model_name: str) -> dict[str, Any]:
    """``torch.compile``'s keyword arguments from ``TORCH_COMPILE_OPTIONAL_PARAMETERS``."""
    text = params.get(COMPILE_PARAMETERS)
    if text is None:
        return {}
    try:
        options = json.loads(text)
    except ValueError as exc:
        raise TritonError.invalid_arg(
            f"model '{model_name}': {COMPILE_PARAMETERS} is not valid JSON ({exc}): {text!r}"
        ) from None
    if not isinstance(options, dict):
        raise TritonError.invalid_arg(
            f"model '{model_name}': {COMPILE_PARAMETERS} must be a JSON object of torch.compile's "
            f"keyword arguments, got {text!r}"
        )
    if "model" in options:
        raise TritonError.invalid_arg("'model' is not an optional parameter for 'torch.compile'")
    return options


def load_source(path: Path, model_name: str) -> ModuleType:
    """Run ``path`` as a module of its own (once per model version; instances share it)."""
    name = f"_tritonpy_torch_model_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TritonError.internal(f"failed to load model '{model_name}': cannot import '{path}'")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickle look classes up there
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: any error, reported as the load's reason
        del sys.modules[name]
        raise TritonError.internal(
            f"failed to load model '{model_name}': {path.name} raised {type(exc).__name__}: {exc}"
        ) from None
    return module


def forget_source(module: ModuleType | None) -> None:
    if module is not None:
        sys.modules.pop(module.__name__, None)


def model_class(torch: Any, module: ModuleType) -> type:
    """The ``torch.nn.Module`` subclass ``module`` serves.

    Triton takes the first such name of ``dir(module)``, so a class imported
    into the file (``from torch.nn import Linear``) can win over the model;
    tritonpy looks at the classes the file defines first (the first by name),
    then at the imported ones as Triton does.
    """
    found = []
    for name in dir(module):
        value = getattr(module, name)
        if isinstance(value, type) and issubclass(value, torch.nn.Module):
            found.append(value)
    candidates = [c for c in found if c.__module__ == module.__name__] or found
    if not candidates:
        raise TritonError.internal("Cannot find a subclass of torch.nn.Module")
    return candidates[0]


def python_program(
    torch: Any,
    path: Path,
    source: ModuleType | None,
    model_name: str,
    config: dict[str, Any],
    device: Any,
    kind: str,
    options: dict[str, Any],
    log: logging.Logger,
) -> Program:
    """One instance's module: built from ``source``'s class (compiled), or ``path`` as
    TorchScript when there is no source; bound to the config by position."""
    if source is None:
        # KIND_MODEL: where it was saved; otherwise read onto the CPU, then moved.
        module = _torchscript(torch, path, model_name, None if kind == "KIND_MODEL" else "cpu")
    else:
        module = _instantiate(torch, model_class(torch, source), model_name)
    if kind == "KIND_MODEL":
        device = _first_parameter_device(module)
    if source is not None:
        _load_weights(torch, module, path, model_name, device, log)
    module = module.to(device)
    module.eval()
    # A TorchScript file runs as it is; a module class through torch.compile.
    run = module if source is None else _compiled(torch, module, options, model_name)
    inputs, outputs = _names(config)
    _check_arity(module.forward, model_name, len(inputs))
    return Program(
        call=run,
        inputs={name: index for index, name in enumerate(inputs)},
        outputs={name: index for index, name in enumerate(outputs)},
        arity=len(inputs),
        device=device,
        module=module,
    )


def _compiled(torch: Any, module: Any, options: dict[str, Any], model_name: str) -> Any:
    import_compiler("torch._dynamo")
    try:
        return torch.compile(module, **options)
    except Exception as exc:  # torch's own checks of its keyword arguments
        raise TritonError.invalid_arg(
            f"model '{model_name}': torch.compile failed with {COMPILE_PARAMETERS} {options}: {exc}"
        ) from None


def _torchscript(torch: Any, path: Path, model_name: str, map_location: str | None) -> Any:
    try:
        return torch.jit.load(str(path), map_location=map_location)
    except Exception as exc:  # torch raises RuntimeError and others for files it cannot read
        raise TritonError.internal(f"failed to load model '{model_name}': {exc}") from None


def _instantiate(torch: Any, cls: type, model_name: str) -> Any:
    try:
        return cls()
    except Exception as exc:  # the user's constructor
        raise TritonError.internal(
            f"failed to load model '{model_name}': {cls.__name__}() raised {type(exc).__name__}: {exc}"
        ) from None


def _first_parameter_device(module: Any) -> Any:
    """KIND_MODEL: where the module put its first parameter (Triton's rule: none is an error)."""
    for parameter in module.parameters():
        return parameter.device
    raise TritonError.internal("Cannot determine model device")


def _load_weights(
    torch: Any, module: Any, path: Path, model_name: str, device: Any, log: logging.Logger
) -> None:
    weights = path.with_suffix(".pt")
    if not weights.exists():
        log.info("Model parameter file not found for '%s' (%s)", model_name, weights.name)
        return
    try:
        module.load_state_dict(torch.load(str(weights), map_location=device))
    except Exception as exc:  # a file that is no state dict, or one for another module
        raise TritonError.internal(
            f"failed to load model '{model_name}': the weights in {weights.name} do not load into "
            f"{type(module).__name__}: {exc}"
        ) from None


def _names(config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Inputs and outputs in call order: the config's, then (beyond Triton's runtime,
    which has neither) a sequence model's controls and states and the batch inputs."""
    inputs, outputs = call_names(config)
    return inputs + batch_input_targets(config), outputs


def _check_arity(forward: Any, model_name: str, count: int) -> None:
    """Fail the load when ``forward()`` cannot take ``count`` positional tensors
    (Triton's runtime fails every request instead)."""
    try:
        params = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):  # a signature Python cannot read: let the call decide
        return
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    keyword_only = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keyword_only:
        raise TritonError.invalid_arg(
            f"unable to load model '{model_name}': forward() has keyword-only arguments without "
            f"defaults ({', '.join(keyword_only)}), which the configuration's inputs cannot fill"
        )
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if count > len(positional) or count < len(required):
        raise TritonError.invalid_arg(
            f"unable to load model '{model_name}', configuration expects {count} inputs, "
            f"model provides {len(positional)}"
        )
