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
      GPU when one is present and the backend can use it: see
      :class:`GpuSupport`; ``KIND_CPU`` for a backend that never runs on a GPU).
    - ``parallel_instance_init``: whether instances of one model may run
      ``instance_initialize`` concurrently.
    - ``autofill_dynamic_batching``: whether a model that ``auto_complete_config``
      makes batching (``max_batch_size`` from 0 to more) gets ``dynamic_batching``
      when it chose no scheduler, as Triton's ONNX Runtime and TensorRT backends
      give it. False for a backend whose models choose for themselves (Triton's
      Python backend: ``set_dynamic_batching()``).
    """

    platforms: tuple[str, ...] = ()
    default_model_filename: str = ""
    default_instance_kind: str = "KIND_AUTO"
    default_instance_count: int = 1
    parallel_instance_init: bool = False
    autofill_dynamic_batching: bool = True


@dataclass(frozen=True, slots=True)
class GpuSupport:
    """Whether a backend, as installed here, can run a model's instances on a GPU.

    Returned by a backend's optional ``gpu_support`` hook; the core asks it on
    hosts with a GPU, before it fills in the model's instance groups.

    - ``usable``: the backend can run this model on a GPU here (onnxruntime
      with its CUDA provider, torch with CUDA, ...).
    - ``reason``: when not usable, why, for the user: it ends the log line that
      says which kind a model got, and the load error of an explicit
      ``KIND_GPU`` group (``"onnxruntime 1.23 here has no CUDAExecutionProvider:
      install onnxruntime-gpu"``).
    - ``kind_gpu_runs_on_cpu``: when not usable, an explicit ``KIND_GPU`` group
      still loads and the backend runs its instances on the CPU (and says so);
      by default such a group fails to load with ``reason``.

    A model with no instance group, or a ``KIND_AUTO`` group, gets ``KIND_CPU``
    when not usable, ``KIND_GPU`` when usable (as Triton does on a GPU host).
    """

    usable: bool = True
    reason: str = ""
    kind_gpu_runs_on_cpu: bool = False
