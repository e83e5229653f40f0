"""Loading a ``model.py`` and calling its ``TritonPythonModel`` (in a stub or in the server)."""

from __future__ import annotations

import copy
import importlib.util
import inspect
import itertools
import json
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from ._api import InferenceRequest, InferenceResponse, ModelConfig, TritonError

#: ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``.
_FINAL = 1

_counter = itertools.count()
_OWN = str(Path(__file__).resolve().parent)


def error_text(exc: BaseException) -> str:
    """``Type: message`` and the model's frames, as Triton reports a model's exception.

    Frames of this package and of the import machinery are left out: they say
    nothing about the model.
    """
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith((_OWN, "<frozen"))
    ]
    lines = [f"  {f.filename}({f.lineno}): {f.name}" for f in reversed(frames)]
    head = str(exc) if isinstance(exc, ContractError) else f"{type(exc).__name__}: {exc}"
    return head + ("\n\nAt:\n" + "\n".join(lines) + "\n" if lines else "")


class ContractError(Exception):
    """A model broke the ``TritonPythonModel`` contract; reported without type or frames."""


def is_decoupled(model_config: str) -> bool:
    """Whether a model's config (as JSON, the ``model_config`` of ``initialize``'s args)
    makes it decoupled."""
    try:
        config = json.loads(model_config)
    except ValueError:
        return False
    policy = config.get("model_transaction_policy") if isinstance(config, dict) else None
    return bool(isinstance(policy, dict) and policy.get("decoupled"))


def check_responses(
    result: Any, requests: list[InferenceRequest], model: str, decoupled: bool
) -> list[InferenceResponse | None] | None:
    """What a non-None ``execute`` returned, checked as Triton checks it: one
    ``InferenceResponse`` per request, or ``None`` for a request released with
    ``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE`` or answered through its response sender.

    A list that leaves a request to its sender is answered through the senders: the
    responses returned go out as each request's last (FINAL), a request left with
    neither gets an error, and None is returned (as when ``execute`` returns None).
    The wording is Triton's (its messages end in a newline too).
    """
    if decoupled:
        raise ContractError(
            f"Python model '{model}' is using the decoupled mode and the execute function must return None."
        )
    count = len(requests)
    if not isinstance(result, (list, tuple)):
        raise ContractError(f"Expected a list in the execute return, found type '{type(result)}'.")
    if len(result) != count:
        raise ContractError(
            "Number of InferenceResponse objects do not match the number of InferenceRequest "
            f"objects. InferenceRequest(s) size is:{count}, and InferenceResponse(s) size "
            f"is:{len(result)}\n"
        )
    to_senders = False
    for response, request in zip(result, requests):
        if response is None:
            to_senders = to_senders or (request._sender is not None and not request._rescheduled)
            continue
        if request._rescheduled:
            raise ContractError(
                "Expected a None object in the execute function return list for reschduled "
                f"request, found type '{type(response)}'."
            )
        if not isinstance(response, InferenceResponse):
            raise ContractError(
                "Expected an 'InferenceResponse' object in the execute function return list, "
                f"found type '{type(response)}'."
            )
        if request._sender is not None:
            request._sender._count(response, _FINAL)  # returned: its last, as Triton counts it
    if not to_senders:
        return list(result)
    for response, request in zip(result, requests):
        if request._rescheduled or (response is None and request._sender is not None):
            continue  # handed back, or its sender answers it (maybe later, from a thread)
        made = request._sender is None
        sender = request.get_response_sender()
        if response is None:  # nobody will answer it: say so rather than leave it waiting
            error = TritonError(f"model '{model}' returned None for a request it did not answer")
            response = InferenceResponse(error=error)
            made = True
        if made:
            sender._count(response, _FINAL)
        sender._send(response, _FINAL)
    return None


def load_module(model_file: str | Path) -> ModuleType:
    """Import ``model_file`` under a unique name; its folder joins ``sys.path`` (as in Triton)."""
    path = Path(model_file)
    if not path.is_file():
        raise ContractError(f"model file '{path}' does not exist")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"_tritonpy_model_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ContractError(f"cannot import '{path}'")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise ContractError(f"'{path}' defines no class TritonPythonModel")
    return module


def auto_complete(model_file: str | Path, config: dict[str, Any]) -> dict[str, Any]:
    """Run ``TritonPythonModel.auto_complete_config`` (when defined) on ``config``."""
    cls = load_module(model_file).TritonPythonModel
    hook = getattr(cls, "auto_complete_config", None)
    if hook is None:
        return config
    result = hook(ModelConfig(copy.deepcopy(config)))  # the model's own, as Triton's JSON copy
    if not isinstance(result, ModelConfig):
        raise ContractError(
            f"auto_complete_config function in model '{config.get('name', '')}' must return a valid "
            "pb.ModelConfig object."
        )
    return result.as_dict()


class ModelHost:
    """One instance of a ``TritonPythonModel``."""

    def __init__(self, model_file: str | Path) -> None:
        self.module = load_module(model_file)
        self.model = self.module.TritonPythonModel()
        execute = getattr(self.model, "execute", None)
        if execute is None:
            raise ContractError("TritonPythonModel has no execute method")
        self.execute = execute
        self.is_async = inspect.iscoroutinefunction(execute)

    def initialize(self, args: dict[str, str]) -> None:
        init = getattr(self.model, "initialize", None)
        if init is None:
            return
        result = init(args)
        if inspect.iscoroutine(result):
            import asyncio

            asyncio.run(result)

    @property
    def has_is_ready(self) -> bool:
        return getattr(self.model, "is_ready", None) is not None

    def is_ready(self, loop: Any = None) -> bool:
        """The model's ``is_ready()`` (True when it has none); ``async def`` ones run on
        ``loop`` when given (the model's own), else on a loop of their own."""
        check = getattr(self.model, "is_ready", None)
        if check is None:
            return True
        result = check()
        if inspect.iscoroutine(result):
            import asyncio

            if loop is not None:
                result = asyncio.run_coroutine_threadsafe(result, loop).result()
            else:
                result = asyncio.run(result)
        if not isinstance(result, bool):
            raise ContractError("is_ready() must return a boolean value")
        return result

    def finalize(self) -> None:
        fin = getattr(self.model, "finalize", None)
        if fin is not None:
            fin()
