"""tritonpy on Ray Serve: a deployment whose replicas each embed the in-process server.

Ray does the cluster work (placing replicas, replacing dead ones, autoscaling on
ongoing requests, the HTTP proxy); tritonpy adds nothing of its own to it. Each
replica is a ``tritonpy.Server`` over the same repository (a path every node
sees, or an object-store URI) and answers:

- HTTP through Ray's proxy with tritonpy's own HTTP front end as the replica's
  ASGI app: every Triton v2 route (health, metadata, config, infer with JSON or
  binary tensors, statistics, repository), so ``tritonclient.http`` and
  ``perf_analyzer -i http`` point at Ray's port unchanged. Health and
  statistics are one replica's, the one the proxy chose.
- Python callers through a deployment handle: ``await handle.infer.remote(
  "model", {"INPUT0": array})`` returns ``{output: array}``.

Model control reaches every replica: a load or unload (the HTTP repository
API or the handle's ``load_model`` / ``unload_model``) is appended to a log
held by a small named Ray actor and applied by every replica in log order: at
once by the replica that took the call (which answers with its result), within
``control_poll_s`` by the others, and from the start by a replica that Ray
adds or replaces later, so every replica serves the same models.

``build_app`` makes the application; ``tritonpy ray serve`` runs it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
from tritonpy_sdk import TritonError

log = logging.getLogger("tritonpy")

#: The Ray namespace of the model-control logs.
NAMESPACE = "tritonpy"

_LOAD_PATH = "/v2/repository/models/"


def _ray() -> tuple[Any, Any]:
    """``ray`` and ``ray.serve``, or one line naming the extra that installs them."""
    try:
        import ray
        from ray import serve
    except ImportError:
        raise TritonError.invalid_arg("tritonpy ray needs Ray Serve: pip install 'tritonpy[ray]'") from None
    return ray, serve


class ModelControlLog:
    """The model-control calls of one application, in order (a Ray actor)."""

    def __init__(self) -> None:
        self._ops: list[tuple[Any, ...]] = []

    def append(self, op: tuple[Any, ...]) -> int:
        """Add ``op``; its sequence number (from 1)."""
        self._ops.append(op)
        return len(self._ops)

    def since(self, applied: int) -> list[tuple[Any, ...]]:
        """The ops after the first ``applied``."""
        return self._ops[applied:]


class TritonpyReplica:
    """One replica: a started ``tritonpy.Server``, its HTTP front end, and the handle API.

    Made a Serve deployment by ``build_app`` (``serve.ingress`` with the front end's
    ASGI app, built by ``__serve_build_asgi_app__``)."""

    def __init__(self, options: Mapping[str, Any], control: str, control_poll_s: float = 0.5) -> None:
        ray, serve = _ray()
        from .server import Server

        self.replica = serve.get_replica_context().replica_id.unique_id
        self.server = Server(**dict(options))
        self.server.start()
        self._log = ray.get_actor(control, namespace=NAMESPACE)
        self._applied = 0
        self._results: dict[int, Any] = {}
        self._lock = asyncio.Lock()
        self._app: Any = None
        self._poll_s = control_poll_s
        self._follower: asyncio.Task[None] | None = None

    def __serve_build_asgi_app__(self) -> Any:
        from .http.app import create_app

        self._app = create_app(self.server)
        replica = self

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if replica._follower is None:  # the replica's loop runs now: follow the log on it
                replica._follower = asyncio.get_running_loop().create_task(replica._follow())
            if _is_model_control(scope):
                body = await _read_body(receive)
                op = ("http", scope["method"], scope["path"], list(scope.get("headers", [])), body)
                status, headers, answer = await replica._control(op)
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": answer})
                return
            await replica._app(scope, receive, send)

        return app

    # -- the handle API ------------------------------------------------------------------

    async def infer(
        self,
        model: str,
        inputs: Mapping[str, Any],
        version: int = -1,
        outputs: Sequence[str] | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> dict[str, np.ndarray[Any, Any]]:
        """One inference: ``{input name: array}`` in, ``{output name: array}`` out (the
        first response's; TritonError as the server raises it)."""
        handle = self.server.model(model, version)
        kwargs: dict[str, Any] = {}
        if outputs is not None:
            kwargs["requested_output_names"] = list(outputs)
        if parameters is not None:
            kwargs["parameters"] = dict(parameters)
        async for response in handle.async_infer(inputs=dict(inputs), **kwargs):
            return {name: t.data for name, t in response.outputs.items()}
        raise TritonError.internal(f"model '{model}' sent no response")

    async def load_model(self, name: str, config: str = "", files: Mapping[str, bytes] | None = None) -> None:
        """Load or reload ``name`` on every replica (explicit model control)."""
        await self._control(("call", "load_model", name, config, dict(files or {})))

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """Unload ``name`` on every replica (explicit model control)."""
        await self._control(("call", "unload_model", name, unload_dependents))

    async def repository_index(self) -> list[dict[str, str]]:
        """This replica's repository index (name, version, state, reason)."""
        await self._catch_up()
        return self.server.repository_index()

    async def replica_id(self) -> str:
        """Which replica answered (for tests and debugging)."""
        return str(self.replica)

    def check_health(self) -> None:
        """Ray's health check: a replica whose server stopped is replaced."""
        if not self.server.live():
            raise RuntimeError("the tritonpy server in this replica is not live")

    def __del__(self) -> None:
        # Serve calls this on a graceful shutdown: in-flight requests finish, models unload.
        server = getattr(self, "server", None)
        if server is not None:
            server.stop()

    # -- model control through the log ------------------------------------------------------

    async def _control(self, op: tuple[Any, ...]) -> Any:
        seq = await self._log.append.remote(op)
        await self._catch_up()
        result = self._results.pop(seq)
        if isinstance(result, TritonError):
            raise result
        return result

    async def _catch_up(self) -> None:
        async with self._lock:
            ops = await self._log.since.remote(self._applied)
            for op in ops:
                self._applied += 1
                try:
                    result: Any = await self._apply(op)
                except TritonError as exc:
                    result = exc
                if len(self._results) > 64:  # results nobody waits for (others' ops)
                    self._results.clear()
                self._results[self._applied] = result

    async def _apply(self, op: tuple[Any, ...]) -> Any:
        if op[0] == "http":
            _, method, path, headers, body = op
            return await _call_asgi(self._app, method, path, headers, body)
        _, call, *args = op
        return await asyncio.to_thread(getattr(self.server, call), *args)

    async def _follow(self) -> None:
        while True:
            try:
                await self._catch_up()
            except Exception:  # the log actor restarting: try again at the next tick
                log.exception("following the model-control log failed")
            await asyncio.sleep(self._poll_s)


def _is_model_control(scope: Mapping[str, Any]) -> bool:
    path = str(scope.get("path", ""))
    return (
        scope.get("type") == "http"
        and scope.get("method") == "POST"
        and path.startswith(_LOAD_PATH)
        and path.rsplit("/", 1)[-1] in ("load", "unload")
    )


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _call_asgi(
    app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run one request through ``app``; (status, headers, body)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
    }
    sent = False
    out: dict[str, Any] = {"status": 500, "headers": [], "body": []}

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            out["body"].append(message.get("body", b""))

    await app(scope, receive, send)
    return out["status"], out["headers"], b"".join(out["body"])


def build_app(
    model_repository: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    replicas: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    target_ongoing_requests: float = 8,
    num_cpus: float = 1,
    name: str = "tritonpy",
    control_poll_s: float = 0.5,
    **server_options: Any,
) -> Any:
    """The Ray Serve application: ``serve.run(build_app("s3://b/models", replicas=2))``.

    ``replicas`` fixes the number of replicas; ``min_replicas`` / ``max_replicas``
    let Ray autoscale between them on ongoing requests per replica
    (``target_ongoing_requests``). ``num_cpus`` is what each replica reserves.
    ``server_options`` are ``tritonpy.ServerOptions`` fields (``model_control_mode``,
    ``load_model``, ...), the same in every replica. Creates the application's
    model-control log (a detached named actor) in the connected Ray cluster."""
    ray, serve = _ray()
    from .options import ServerOptions

    known = {f.name for f in fields(ServerOptions)}
    unknown = sorted(set(server_options) - known)
    if unknown:
        raise TypeError(f"unknown server option(s): {', '.join(unknown)}")
    repos = [model_repository] if isinstance(model_repository, str | os.PathLike) else model_repository
    options = {**server_options, "model_repository": [os.fspath(r) for r in repos]}
    if replicas is not None and (min_replicas is not None or max_replicas is not None):
        raise TritonError.invalid_arg("give either replicas or min_replicas / max_replicas, not both")
    config: dict[str, Any] = {"ray_actor_options": {"num_cpus": num_cpus}, "name": name}
    if min_replicas is not None or max_replicas is not None:
        low = 1 if min_replicas is None else min_replicas
        config["autoscaling_config"] = {
            "min_replicas": low,
            "max_replicas": max(low, max_replicas or low),
            "target_ongoing_requests": target_ongoing_requests,
        }
    else:
        config["num_replicas"] = 1 if replicas is None else replicas
    control = f"tritonpy-control-{name}-{uuid.uuid4().hex[:8]}"
    ray.remote(num_cpus=0)(ModelControlLog).options(
        name=control, namespace=NAMESPACE, lifetime="detached"
    ).remote()
    deployment = serve.deployment(**config)(serve.ingress()(TritonpyReplica))
    return deployment.bind(options, control, control_poll_s)


def delete_control_logs(name: str = "tritonpy") -> None:
    """Kill the model-control logs of application ``name`` (after ``serve.delete``)."""
    ray, _ = _ray()
    from ray.util import list_named_actors

    for actor in list_named_actors(all_namespaces=True):
        if actor["namespace"] == NAMESPACE and actor["name"].startswith(f"tritonpy-control-{name}-"):
            ray.kill(ray.get_actor(actor["name"], namespace=NAMESPACE))


def main(args: Any) -> int:
    """``tritonpy ray serve``: run the application until SIGINT or SIGTERM."""
    try:
        ray, serve = _ray()
    except TritonError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    # Blocked before Ray starts its threads, so that sigwait below receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    ray.init(address=args.address, namespace=NAMESPACE, log_to_driver=False)
    serve.start(http_options={"host": args.http_host, "port": args.http_port})
    options: dict[str, Any] = {"model_control_mode": args.model_control_mode}
    if args.load_model:
        options["load_model"] = args.load_model
    app = build_app(
        args.model_repository,
        replicas=args.replicas,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        target_ongoing_requests=args.target_ongoing_requests,
        num_cpus=args.num_cpus,
        name=args.name,
        **options,
    )
    serve.run(app, name=args.name, route_prefix="/")
    where = f"http://{args.http_host}:{args.http_port}"
    print(f"tritonpy on Ray Serve at {where} (application '{args.name}')", flush=True)
    received = signal.sigwait({signal.SIGINT, signal.SIGTERM})
    print(f"{signal.Signals(received).name}: stopping the application", flush=True)
    serve.delete(args.name)
    delete_control_logs(args.name)
    serve.shutdown()
    ray.shutdown()
    return 0
