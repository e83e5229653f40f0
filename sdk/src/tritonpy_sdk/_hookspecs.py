"""Hook specifications of a tritonpy backend.

A backend is a Python module (or object) registered under the entry-point
group ``tritonpy.backends``; the entry point's name is the backend name that
``backend: "..."`` in ``config.pbtxt`` refers to. It implements some of the
hooks below, each marked with ``@tritonpy_sdk.hookimpl``. Only ``backend_info``
and ``execute`` are required.

Call order, mirroring Triton's backend API::

    backend_info()                      discovery: before any model uses the backend
    initialize(backend)                 once, when the first model needs the backend
      auto_complete_config(model)       per model version, before validation
      gpu_support(backend, model)       per model version on a GPU host (optional)
      model_initialize(model)           per model version
        instance_initialize(instance)   per instance (instance_group count x kind)
          execute(instance, requests)   many times
          execute_nowait(instance, requests, complete)
                                        instead, for instances that only wait on I/O (optional)
          execute_direct(instance, call)
                                        one request of the in-process predict, as arrays (optional)
          instance_ready(instance)      on readiness checks (optional), beside execute
        instance_finalize(instance)     per instance, at unload
      model_finalize(model)             per model version, at unload
    finalize(backend)                   at server shutdown

Threads: lifecycle hooks run on the core's loader thread, never on the event
loop. ``execute`` runs on the instance's own worker thread: it is never called
concurrently for one instance, but different instances (of the same model or
others) execute at the same time, so a backend that releases the GIL runs its
instances in parallel. Model-level ``state`` shared by instances must be
thread-safe for reading.

Errors: a hook signals failure by raising ``TritonError`` (any other exception
is wrapped as INTERNAL with its message). A failing load-time hook makes that
model UNAVAILABLE with the message as the reason; the server keeps serving the
other models. A failing ``execute`` fails the requests it was given, nothing
else.

Objects: the same ``Backend``, ``Model`` and ``ModelInstance`` objects reach
every hook of their lifetime (the ``Model`` given to ``auto_complete_config``
is the one ``model_initialize`` gets), so what a hook keeps in ``state``
stays. Before ``auto_complete_config`` a model has its ``name``, ``version``,
``repository_path``, ``version_path``, ``model_path`` (the config's
``default_model_filename``, else the backend's), ``backend``, ``config`` (every
field, defaults included) and ``user_config`` (only what the user wrote).

The high-level alternative, ``tritonpy_sdk.Predictor``, derives
``instance_initialize``, ``execute``, ``instance_finalize`` and (when
overridden) ``auto_complete_config`` from a class with ``load`` and
``predict``.

Hooks receive their arguments by name; an implementation may accept fewer
arguments than the specification lists (pluggy's rule), never others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pluggy

from ._backend_info import BackendInfo, GpuSupport
from ._direct import DirectCall
from ._inference import InferenceRequest, InferenceResponse
from ._objects import Backend, ExecuteComplete, Model, ModelInstance

PROJECT_NAME = "tritonpy"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -- discovery -----------------------------------------------------------------


@hookspec(firstresult=True)
def backend_info() -> BackendInfo:
    """Describe the backend: platforms, default model file, default instances.

    Called once, right after the backend's module is imported, on the loader
    thread. Must be cheap and must not import the backend's framework. Return a
    :class:`BackendInfo`. Required.
    """
    raise NotImplementedError


# -- backend lifecycle -----------------------------------------------------------


@hookspec
def initialize(backend: Backend) -> None:
    """Set the backend up; called once before its first model loads.

    ``backend.config`` holds the ``--backend-config`` settings for this backend.
    Import the framework here and keep what you need in ``backend.state``.
    Raising makes every model using this backend UNAVAILABLE with the message.
    """


@hookspec
def finalize(backend: Backend) -> None:
    """Release what ``initialize`` acquired; called once at server shutdown.

    Called only if ``initialize`` succeeded, after every model of this backend
    was finalized. Exceptions are logged and otherwise ignored.
    """


# -- model lifecycle ---------------------------------------------------------------


@hookspec
def auto_complete_config(model: Model) -> None:
    """Fill in what ``config.pbtxt`` leaves out, from the model file.

    Called for each model version before its config is validated, unless the
    server runs with ``--disable-auto-complete-config``. ``model.config`` is a
    mutable dict in Triton's JSON form, every field present (``max_batch_size:
    0``, ``input: []`` when unset); ``model.user_config`` holds only what the
    user wrote, so ``"max_batch_size" in model.user_config`` tells an explicit 0
    from none. Add missing ``input``/``output`` entries and ``max_batch_size``
    (``model.backend.default_max_batch_size`` when the model can batch and the
    user set none; ``complete_input``, ``complete_output`` and
    ``complete_max_batch_size`` do this), but never change what the user
    wrote. Raise ``TritonError`` when the file cannot be read or
    contradicts the config.
    """


@hookspec(firstresult=True)
def gpu_support(backend: Backend, model: Model) -> GpuSupport:
    """Whether this install of the backend can run ``model`` on a GPU (optional).

    Asked on hosts with a GPU only, per model version, after
    ``auto_complete_config`` and before the core fills in the instance groups:
    a model with no ``instance_group`` (or a ``KIND_AUTO`` group) gets
    ``KIND_GPU`` when the answer is usable and ``KIND_CPU`` when it is not; an
    explicit ``KIND_GPU`` group fails to load with ``reason`` unless
    ``kind_gpu_runs_on_cpu``. Answer from what is installed (the framework
    ``initialize`` imported: its CUDA build, its providers), cheaply; most
    backends need only ``backend``. Return a :class:`GpuSupport`.

    Without this hook the backend is taken to use a GPU wherever the host has
    one, as Triton's core assumes of its backends: a backend that never runs on
    a GPU says so with ``BackendInfo(default_instance_kind="KIND_CPU")``.
    """
    raise NotImplementedError


@hookspec
def model_initialize(model: Model) -> None:
    """Load the model version (shared state of its instances) into ``model.state``.

    Called after the config is final and validated. Raising makes this model
    version UNAVAILABLE with the message as the reason.
    """


@hookspec
def model_finalize(model: Model) -> None:
    """Release ``model.state``; called once at unload, after every instance finalized."""


# -- instance lifecycle -----------------------------------------------------------


@hookspec
def instance_initialize(instance: ModelInstance) -> None:
    """Create one instance (e.g. an inference session) into ``instance.state``.

    Called once per instance after ``model_initialize``. Instances of one model
    are initialised one at a time unless ``BackendInfo.parallel_instance_init``
    is true. ``instance.kind`` and ``instance.device_id`` say where it runs.
    """


@hookspec
def instance_finalize(instance: ModelInstance) -> None:
    """Release ``instance.state``; called once at unload, never during ``execute``."""


@hookspec(firstresult=True)
def instance_ready(instance: ModelInstance) -> bool:
    """Whether a loaded instance can serve right now (optional).

    Asked on every readiness check of its model (HTTP ``/v2/models/<m>/ready``,
    gRPC ``ModelReady``, ``Server.model_ready``), from a thread of its own and
    possibly while the instance executes; the model is ready when every
    instance says so. Keep it quick: a check that takes longer than five
    seconds counts as not ready. Without this hook a loaded model is ready.
    """
    raise NotImplementedError


# -- execution ------------------------------------------------------------------------


@hookspec(firstresult=True)
def execute(
    instance: ModelInstance, requests: Sequence[InferenceRequest]
) -> Sequence[InferenceResponse | None] | None:
    """Run a batch of requests on one instance; return one response per request.

    Called on the instance's worker thread, never concurrently for the same
    instance. ``requests`` are already validated against the config (names,
    data types, shapes, batch size); there may be several when the model
    batches (use :func:`gather_inputs` / :func:`scatter_output`). Return the
    responses in request order; a response may carry an ``error`` to fail just
    that request. Raising ``TritonError`` fails every request of the call.
    Output tensors may include outputs the client did not request: the core
    drops them, applies ``reshape`` and encodes BYTES.

    Instead of returning responses, a backend may return ``None`` and answer
    through each request's ``response_sender`` — later, from any thread — ending
    every request with ``RESPONSE_COMPLETE_FINAL``. A decoupled model
    (``model_transaction_policy { decoupled: true }``) answers this way and may
    send any number of responses per request; other models send exactly one.
    The core counts the execution as running until every request of the call
    sent FINAL, and ``request.is_cancelled()`` tells whether the client left.

    A request the backend hands back with ``request.reschedule()`` (before
    returning) gets no response from this call: ``None`` in its place in the
    returned list, no FINAL through its sender. The core queues it again with
    its model's scheduler (only the sequence batcher with ``iterative_sequence``
    takes requests back; elsewhere the request fails with INVALID_ARG).
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def execute_nowait(
    instance: ModelInstance, requests: Sequence[InferenceRequest], complete: ExecuteComplete
) -> None:
    """Start a batch on an instance whose execution only waits on I/O, and return at once.

    Optional, for backends whose ``execute`` hands the work to another process
    or a device and waits (the Python backend's stub): the core then needs no
    thread per instance and no hand-off between threads. It is called only
    for instances that set ``instance.nowait = True`` in
    ``instance_initialize``, and only where the model's scheduler dispatches
    single requests (no ``dynamic_batching``, no rate limiter); ``execute`` is
    still called elsewhere, so a backend implements both.

    It may be called on the server's event loop or on the thread that
    completed the previous batch, so it must not block: send the work and
    return. Call ``complete(responses)`` — or ``complete(None, error)`` to fail
    the batch, or ``complete(None)`` once every request was answered through
    its ``response_sender`` — exactly once, from any thread, possibly before
    returning. The instance takes no other batch until then; what ``execute``
    says of the responses holds for ``complete`` too. An exception raised by
    the hook itself fails the batch.
    """


@hookspec(firstresult=True)
def execute_direct(
    instance: ModelInstance, call: DirectCall
) -> dict[str, np.ndarray[Any, Any]] | Sequence[InferenceResponse | None] | None:
    """Run one request of the in-process API's ``predict`` given as arrays (optional).

    For backends whose models take arrays anyway: the request reaches the model
    without ``InferenceRequest`` and ``InferenceResponse`` objects. It is called
    only for instances that set ``instance.direct = True`` in
    ``instance_initialize``, on the calling thread, holding the instance (as
    ``execute`` would be), and only where nothing between the caller and
    ``execute`` would change the request or its answer: a model that is not
    decoupled, without dynamic or sequence batching, rate limiting, response
    cache, ``reshape`` or device-resident inputs, for a ``predict`` without
    options, of validated host arrays, while tracing is off. ``execute`` is
    still called everywhere else, so a backend implements both.

    Return ``{output name: numpy array}`` (host arrays, only outputs the config
    declares) when the model answered with just that. Otherwise, for anything
    else the model did (an error, a response sender, a request handed back,
    device outputs), make the request with ``call.request()`` and return what
    ``execute`` returns for ``[call.request()]``, or raise what it raises: the
    core then goes on exactly as after ``execute``.
    """


REQUIRED_HOOKS = ("backend_info", "execute")
