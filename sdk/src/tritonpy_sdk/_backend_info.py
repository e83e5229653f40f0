"""What a backend tells the core before any model is loaded."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """Facts the core needs about a backend before it loads a model with it.

    Returned by a backend's ``backend_info`` hook.

    - ``platforms``: Triton ``platform:`` strings this backend serves
      (e.g. ``("onnxruntime_onnx",)``).
    - ``default_model_filename``: the model file looked for in a version
      folder when the config names none (``model.onnx``). The core also uses
      it to infer the backend of a model whose config names neither backend
      nor platform.
    - ``default_instance_kind`` / ``default_instance_count``: the instance
      group used when the config gives none (``KIND_AUTO`` lets the core pick
      GPU when one is present).
    - ``parallel_instance_init``: whether instances of one model may run
      ``instance_initialize`` concurrently.
    """

    platforms: tuple[str, ...] = ()
    default_model_filename: str = ""
    default_instance_kind: str = "KIND_AUTO"
    default_instance_count: int = 1
    parallel_instance_init: bool = False
