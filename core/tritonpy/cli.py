"""``tritonpy`` command line: ``serve`` with tritonserver's flag names, ``backends``, ``new-backend``.

The CLI only parses flags into ``ServerOptions``; everything else lives in the
server.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NoReturn

from tritonpy_sdk import TritonError

from . import hostpolicy
from ._version import __version__
from .cli_triton import add_triton_flags, deprecations, notices, refusal
from .hostpolicy import HostPolicy
from .options import ServerOptions


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got '{text}'")


def _flag(parser: argparse.ArgumentParser, name: str, help: str, **kw: object) -> None:
    """A tritonserver-style boolean: ``--x``, ``--x=true`` or ``--x=false``."""
    parser.add_argument(name, type=_bool, nargs="?", const=True, help=help, **kw)  # type: ignore[arg-type]


def _backend_config(values: list[str]) -> dict[str, dict[str, str]]:
    """``<backend>,<key>=<value>`` (or global ``<key>=<value>``) → nested dict."""
    result: dict[str, dict[str, str]] = {}
    for item in values:
        backend, _, setting = item.rpartition(",") if "," in item else ("", "", item)
        key, sep, value = setting.partition("=")
        if not sep or not key:
            raise SystemExit(
                f"error: --backend-config expects <backend>,<key>=<value> or <key>=<value>, got '{item}'"
            )
        result.setdefault(backend, {})[key] = value
    return result


def _host_policies(values: list[str]) -> dict[str, HostPolicy]:
    """``--host-policy`` flags → the policies, or tritonserver's error and exit."""
    try:
        return hostpolicy.build([hostpolicy.parse_flag(value) for value in values])
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    except TritonError as exc:
        raise SystemExit(f"error: setting host policy: {exc.message}") from None


def _byte_size(text: str) -> int:
    """A ``--pinned-memory-pool-byte-size`` value (Triton's message for a bad one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"Invalid option value. Got {text}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"Invalid option value. Got {text}: a size is 0 or more bytes")
    return value


def _at_least(minimum: int) -> Callable[[str], int]:
    """An integer flag's type: ``minimum`` or more."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"Invalid option value. Got {text}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"Invalid option value. Got {text}: at least {minimum}")
        return value

    return parse


def _cuda_pool(text: str) -> tuple[int, int]:
    """A ``--cuda-memory-pool-byte-size <gpu>:<bytes>`` value."""
    gpu, sep, size = text.partition(":")
    try:
        pair = int(gpu), int(size)
    except ValueError:
        pair = (-1, -1)
    if not sep or min(pair) < 0:
        raise argparse.ArgumentTypeError(
            f"Invalid option value. Got {text}: expected <integer GPU id>:<integer byte size>, both 0 or more"
        )
    return pair


def _trace_flags(args: argparse.Namespace) -> list[str]:
    """The older ``--trace-file/-level/-rate`` spellings, then ``--trace-config`` (which
    overrides them, as in tritonserver)."""
    items: list[str] = []
    if args.trace_file is not None:
        items.append(f"triton,file={args.trace_file}")
    if args.trace_level is not None:
        items.append(f"level={args.trace_level}")
    if args.trace_rate is not None:
        items.append(f"rate={args.trace_rate}")
    if args.trace_count is not None:
        items.append(f"count={args.trace_count}")
    if args.trace_log_frequency is not None:
        items.append(f"log-frequency={args.trace_log_frequency}")
    return items + list(args.trace_config)


def _cache_flags(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """``--cache-config <cache>,<key>=<value>`` (and ``--response-cache-byte-size``)."""
    result: dict[str, dict[str, str]] = {}
    for item in args.cache_config:
        name, sep, setting = item.partition(",")
        key, eq, value = setting.partition("=")
        if not sep or not eq or not name or not key:
            raise SystemExit(f"error: --cache-config expects <cache>,<key>=<value>, got '{item}'")
        result.setdefault(name, {})[key] = value
    if args.response_cache_byte_size is not None:
        result.setdefault("local", {})["size"] = str(args.response_cache_byte_size)
    return result


class _Parser(argparse.ArgumentParser):
    """Usage errors in a few lines: a short usage, the error, and where the rest is. argparse
    would print the whole usage, ~60 lines for ``serve``, above the one line that matters."""

    def error(self, message: str) -> NoReturn:
        usage = self.format_usage()
        if usage.count("\n") > 4:
            required = [
                f"{action.option_strings[0]} {action.metavar or action.dest.upper()}"
                for action in self._actions
                if action.required and action.option_strings
            ]
            usage = f"usage: {' '.join([self.prog, *required])} [options]\n"
        self.exit(2, f"{usage}{self.prog}: error: {message}\n(`{self.prog} --help` lists every option)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tritonpy", description="Triton-compatible inference server")
    parser.add_argument("--version", action="version", version=f"tritonpy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve a model repository")
    serve.add_argument(
        "--model-repository",
        "--model-store",
        action="append",
        required=True,
        dest="model_repository",
        metavar="PATH",
        help="path of a model repository, or s3://, gs:// or as:// URI of one in object storage; "
        "repeat for several",
    )
    serve.add_argument(
        "--model-control-mode",
        default="none",
        choices=["none", "explicit", "poll"],
        help="none: load every model at start; explicit: load --load-model models, then the "
        "load/unload API; poll: load every model, then follow the repository's changes",
    )
    serve.add_argument(
        "--load-model",
        action="append",
        default=[],
        dest="load_model",
        help="(explicit mode) a model to load at start; repeat for several, '*' for all",
    )
    serve.add_argument(
        "--repository-poll-secs",
        type=float,
        default=15.0,
        help="(poll mode) seconds between polls of the repositories (default 15)",
    )
    serve.add_argument(
        "--model-config-name",
        default="",
        metavar="NAME",
        help="read each model's config from its configs/NAME.pbtxt where it has one (else its config.pbtxt)",
    )
    _flag(
        serve,
        "--model-namespacing",
        "each repository is a namespace: a model name may be in several (default false)",
        default=False,
    )
    serve.add_argument(
        "--model-load-thread-count",
        type=int,
        default=4,
        help="how many models load at once (default 4)",
    )
    serve.add_argument(
        "--model-load-retry-count",
        type=int,
        default=0,
        help="how often a model version that failed to load is tried again (default 0)",
    )
    _flag(
        serve,
        "--allow-http",
        "enable the HTTP front end (default true; false where AIP_MODE=PREDICTION)",
        default=None,
    )
    serve.add_argument("--http-port", type=int, default=8000, help="HTTP port (default 8000)")
    serve.add_argument("--http-address", default="0.0.0.0", help="HTTP address (default 0.0.0.0)")
    _flag(serve, "--reuse-http-port", "share the HTTP port with other servers (SO_REUSEPORT)", default=False)
    serve.add_argument(
        "--http-header-forward-pattern",
        default="",
        metavar="REGEX",
        help="request headers whose name matches become string request parameters",
    )
    _flag(serve, "--allow-sagemaker", "serve Triton's SageMaker routes (default false)", default=False)
    serve.add_argument(
        "--sagemaker-port", type=int, default=8080, help="SageMaker port, at the HTTP address (default 8080)"
    )
    serve.add_argument(
        "--sagemaker-models-root",
        default="/opt/ml/models",
        metavar="DIR",
        help="where SageMaker puts a multi-model endpoint's models (default /opt/ml/models)",
    )
    serve.add_argument(
        "--sagemaker-safe-port-range",
        default=None,
        metavar="LOW-HIGH",
        help="with --allow-sagemaker: the ports the other front ends must use",
    )
    _flag(
        serve,
        "--allow-vertex-ai",
        "serve Triton's Vertex AI routes (default: true where AIP_MODE=PREDICTION)",
        default=None,
    )
    serve.add_argument(
        "--vertex-ai-port",
        type=int,
        default=None,
        help="Vertex AI port, at the HTTP address (default AIP_HTTP_PORT, else 8080)",
    )
    serve.add_argument(
        "--vertex-ai-default-model",
        default="",
        metavar="MODEL",
        help="the model Vertex AI predict requests infer with (default: the only model)",
    )
    _flag(
        serve,
        "--allow-grpc",
        "enable the gRPC front end (default true; false where AIP_MODE=PREDICTION)",
        default=None,
    )
    serve.add_argument("--grpc-port", type=int, default=8001, help="gRPC port (default 8001)")
    serve.add_argument("--grpc-address", default="0.0.0.0", help="gRPC address (default 0.0.0.0)")
    _flag(serve, "--reuse-grpc-port", "share the gRPC port with other servers (SO_REUSEPORT)", default=False)
    serve.add_argument(
        "--grpc-header-forward-pattern",
        default="",
        metavar="REGEX",
        help="call metadata whose key matches becomes string request parameters",
    )
    serve.add_argument(
        "--grpc-implementation",
        choices=["tritonpy", "grpcio"],
        default="tritonpy",
        help="gRPC transport: tritonpy (HTTP/2 on asyncio, default) or grpcio "
        "(grpc.aio; needs tritonpy[grpcio])",
    )
    _flag(serve, "--grpc-use-ssl", "serve gRPC over TLS (needs --grpc-server-cert/-key)", default=False)
    _flag(
        serve, "--grpc-use-ssl-mutual", "require client certificates (needs --grpc-root-cert)", default=False
    )
    serve.add_argument("--grpc-server-cert", default="", help="PEM server certificate for gRPC TLS")
    serve.add_argument("--grpc-server-key", default="", help="PEM server key for gRPC TLS")
    serve.add_argument("--grpc-root-cert", default="", help="PEM CA certificate for client certificates")
    serve.add_argument(
        "--grpc-keepalive-time", type=int, default=7_200_000, help="ms between keepalive pings"
    )
    serve.add_argument("--grpc-keepalive-timeout", type=int, default=20_000, help="ms to wait for a ping ack")
    _flag(
        serve, "--grpc-keepalive-permit-without-calls", "allow keepalive pings without calls", default=False
    )
    serve.add_argument("--grpc-http2-max-pings-without-data", type=int, default=2, help="pings without data")
    serve.add_argument(
        "--grpc-http2-min-recv-ping-interval-without-data", type=int, default=300_000, help="ms between pings"
    )
    serve.add_argument("--grpc-http2-max-ping-strikes", type=int, default=2, help="bad pings tolerated")
    serve.add_argument("--grpc-max-message-size", type=int, default=2**31 - 1, help="largest gRPC message")
    serve.add_argument(
        "--grpc-max-concurrent-streams", type=int, default=1000, help="calls in flight per connection"
    )
    serve.add_argument(
        "--grpc-http2-max-reset-burst", type=int, default=1000, help="stream resets in a burst (0: no limit)"
    )
    serve.add_argument(
        "--grpc-http2-max-reset-rate", type=int, default=33, help="stream resets per second after the burst"
    )
    serve.add_argument(
        "--grpc-max-connection-idle", type=int, default=0, help="ms without calls before closing (0: never)"
    )
    serve.add_argument(
        "--grpc-max-connection-age", type=int, default=0, help="ms before a connection must go (0: never)"
    )
    serve.add_argument(
        "--grpc-max-connection-age-grace", type=int, default=0, help="ms left to its calls then (0: no limit)"
    )
    serve.add_argument(
        "--grpc-max-connections", type=int, default=0, help="open gRPC connections at most (0: no limit)"
    )
    serve.add_argument(
        "--grpc-connection-buffer-limit",
        type=_at_least(1 << 20),
        default=1 << 26,
        help="bytes a gRPC connection may hold of unread requests and unsent responses before "
        "its client is flow-controlled (default 67108864; one larger message may still complete)",
    )
    serve.add_argument(
        "--grpc-stream-max-inflight",
        type=_at_least(1),
        default=128,
        help="requests of one ModelStreamInfer stream in the server at once (default 128)",
    )
    serve.add_argument(
        "--frontend-workers",
        type=_at_least(1),
        default=1,
        help="processes that serve the HTTP and gRPC ports, in front of the one that runs the "
        "models (default 1: that process serves them itself); see docs/scaling.md",
    )
    _flag(serve, "--allow-metrics", "serve Prometheus metrics (default true)", default=True)
    _flag(serve, "--allow-cpu-metrics", "include CPU metrics (default true)", default=True)
    _flag(
        serve, "--allow-gpu-metrics", "include GPU metrics when a GPU is present (default true)", default=True
    )
    serve.add_argument("--metrics-port", type=int, default=8002, help="metrics port (default 8002)")
    serve.add_argument("--metrics-address", default="", help="metrics address (default: the HTTP address)")
    serve.add_argument("--metrics-interval-ms", type=int, default=2000, help="CPU/GPU metrics refresh (ms)")
    serve.add_argument(
        "--metrics-config",
        action="append",
        default=[],
        help="key=value: summary_latencies, histogram_latencies, counter_latencies, ...",
    )
    serve.add_argument(
        "--http-max-input-size",
        type=int,
        default=64 * 1024 * 1024,
        help="largest HTTP request body in bytes (default 64 MiB)",
    )
    serve.add_argument(
        "--http-max-header-size",
        type=int,
        default=64 * 1024,
        help="largest HTTP request line + headers in bytes (default 65536); larger heads get 431",
    )
    serve.add_argument(
        "--http-max-header-count", type=int, default=128, help="most HTTP header fields (default 128)"
    )
    serve.add_argument(
        "--http-header-timeout-secs",
        type=float,
        default=30.0,
        help="seconds a request's line and headers may take to arrive (default 30)",
    )
    serve.add_argument(
        "--http-read-timeout-secs",
        type=float,
        default=60.0,
        help="seconds an incomplete HTTP request body may send nothing (default 60)",
    )
    serve.add_argument(
        "--http-restricted-api",
        action="append",
        default=[],
        help="<api>[,<api>...]:<header>=<value>: these API groups need that header",
    )
    serve.add_argument(
        "--grpc-restricted-protocol",
        action="append",
        default=[],
        help="<protocol>[,<protocol>...]:<header>=<value>: these gRPC groups need that header",
    )
    _flag(
        serve,
        "--disable-auto-complete-config",
        "do not let backends fill in missing config.pbtxt fields",
        default=False,
    )
    _flag(
        serve,
        "--strict-model-config",
        "same as --disable-auto-complete-config (the older flag)",
        default=None,
    )
    _flag(
        serve,
        "--allow-client-shm",
        "let clients register system and CUDA shared-memory regions (default false)",
        default=False,
    )
    _flag(serve, "--strict-readiness", "not ready while any model failed (default true)", default=True)
    _flag(serve, "--exit-on-error", "exit at start if a model fails to load (default true)", default=True)
    serve.add_argument(
        "--backend-config",
        action="append",
        default=[],
        help="<backend>,<setting>=<value> (or <setting>=<value> for all backends)",
    )
    serve.add_argument(
        "--backend-directory",
        default=None,
        help="folder of Python-based backends: <dir>/<backend>/model.py serves models with that backend",
    )
    serve.add_argument("--log-verbose", type=int, default=0, help="verbose logging level (0 = off)")
    _flag(serve, "--log-info", "write info messages (default true)", default=True)
    _flag(serve, "--log-warning", "write warnings (default true)", default=True)
    _flag(serve, "--log-error", "write errors (default true)", default=True)
    serve.add_argument(
        "--log-format", default="default", choices=["default", "ISO8601"], help="log line format"
    )
    serve.add_argument("--log-file", default="", help="write the log to this file instead of standard error")
    serve.add_argument(
        "--trace-config",
        action="append",
        default=[],
        help="level=TIMESTAMPS, rate=N, count=N, log-frequency=N, mode=triton|opentelemetry, "
        "triton,file=PATH, opentelemetry,url=URL, opentelemetry,resource=K=V, opentelemetry,bsp_*=N",
    )
    serve.add_argument(
        "--trace-file", default=None, help="(older flag) same as --trace-config triton,file=PATH"
    )
    serve.add_argument("--trace-level", default=None, help="(older flag) same as --trace-config level=LEVEL")
    serve.add_argument("--trace-rate", default=None, help="(older flag) same as --trace-config rate=N")
    serve.add_argument("--trace-count", default=None, help="(older flag) same as --trace-config count=N")
    serve.add_argument(
        "--trace-log-frequency", default=None, help="(older flag) same as --trace-config log-frequency=N"
    )
    serve.add_argument(
        "--cache-config",
        action="append",
        default=[],
        help="<cache>,<key>=<value>: the response cache, e.g. local,size=104857600",
    )
    serve.add_argument(
        "--response-cache-byte-size",
        type=int,
        default=None,
        help="(older flag) same as --cache-config local,size=N",
    )
    serve.add_argument(
        "--rate-limit",
        default="off",
        choices=["off", "execution_count"],
        help="execution_count: instances execute only while their rate_limiter resources are free",
    )
    serve.add_argument(
        "--rate-limit-resource",
        action="append",
        default=[],
        help="<name>:<count>[:<device>] available units of a rate-limiter resource",
    )
    serve.add_argument(
        "--host-policy",
        action="append",
        default=[],
        metavar="NAME,SETTING=VALUE",
        help="bind the instances of host policy NAME (an instance group's host_policy, else cpu, "
        "gpu_<id> or model): cpu-cores=<a>-<b>[,<c>-<d>...] (CPU affinity of their threads) or "
        "numa-node=<n> (their memory policy); repeatable",
    )
    serve.add_argument(
        "--pinned-memory-pool-byte-size",
        type=_byte_size,
        default=268_435_456,
        help="page-locked host memory for GPU instances' batches (default 268435456; 0: none)",
    )
    serve.add_argument(
        "--cuda-memory-pool-byte-size",
        type=_cuda_pool,
        action="append",
        default=[],
        help="<gpu>:<bytes> device memory pool of a GPU (default 67108864 on each)",
    )
    serve.add_argument(
        "--exit-timeout-secs",
        type=float,
        default=30.0,
        help="seconds shutdown waits for in-flight requests (default 30)",
    )
    serve.add_argument(
        "--id",
        dest="server_id",
        default="triton",
        help="server name reported by server metadata (Triton's default: triton)",
    )
    add_triton_flags(serve)

    backends = sub.add_parser("backends", help="list the installed backends")
    backends.add_argument("--check", action="store_true", help="also import and validate each backend")

    ray = sub.add_parser("ray", help="run on Ray Serve (the tritonpy[ray] extra)")
    ray_sub = ray.add_subparsers(dest="ray_command", required=True)
    ray_serve = ray_sub.add_parser(
        "serve", help="a Ray Serve deployment whose replicas each embed the server over one repository"
    )
    ray_serve.add_argument(
        "--model-repository",
        "--model-store",
        action="append",
        required=True,
        dest="model_repository",
        help="a repository every Ray node reads: a shared path, or an s3://, gs:// or as:// URI",
    )
    replicas = ray_serve.add_mutually_exclusive_group()
    replicas.add_argument("--replicas", type=int, help="a fixed number of replicas (default 1)")
    replicas.add_argument("--min-replicas", type=int, help="autoscale from this many replicas")
    ray_serve.add_argument("--max-replicas", type=int, help="autoscale up to this many replicas")
    ray_serve.add_argument(
        "--target-ongoing-requests",
        type=float,
        default=8,
        help="requests in flight per replica the autoscaler aims at (default 8)",
    )
    ray_serve.add_argument("--num-cpus", type=float, default=1, help="CPUs each replica reserves (default 1)")
    ray_serve.add_argument(
        "--http-host", default="0.0.0.0", help="Ray's HTTP proxy address (default 0.0.0.0)"
    )
    ray_serve.add_argument("--http-port", type=int, default=8000, help="Ray's HTTP proxy port (default 8000)")
    ray_serve.add_argument(
        "--model-control-mode", default="none", choices=["none", "explicit", "poll"], help="as for serve"
    )
    ray_serve.add_argument("--load-model", action="append", help="as for serve (explicit mode)")
    ray_serve.add_argument("--name", default="tritonpy", help="the Serve application's name")
    ray_serve.add_argument(
        "--address", default=None, help="the Ray cluster to join (default: RAY_ADDRESS, else a local one)"
    )

    scaffold = sub.add_parser("new-backend", help="write an installable backend package to start from")
    scaffold.add_argument("name", help="the backend name (the `backend:` value in config.pbtxt)")
    scaffold.add_argument("directory", nargs="?", help="where to write it (default: ./tritonpy-backend-NAME)")
    return parser


def options_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServerOptions:
    """``ServerOptions`` for ``args``; as tritonserver, ``AIP_MODE=PREDICTION`` in ``environ``
    (a Vertex AI deployment) turns the Vertex AI front end on and HTTP and gRPC off unless
    their flags say otherwise."""
    from .repository.remote import repository_root

    env = os.environ if environ is None else environ
    vertex_mode = env.get("AIP_MODE") == "PREDICTION"

    # As tritonserver: --disable-auto-complete-config wins over the older --strict-model-config.
    disable = bool(args.disable_auto_complete_config) or bool(args.strict_model_config)
    return ServerOptions(
        model_repository=[repository_root(p) for p in args.model_repository],
        model_control_mode=args.model_control_mode,
        load_model=args.load_model,
        repository_poll_secs=args.repository_poll_secs,
        model_load_thread_count=args.model_load_thread_count,
        model_load_retry_count=args.model_load_retry_count,
        model_config_name=args.model_config_name,
        model_namespacing=args.model_namespacing,
        disable_auto_complete_config=disable,
        strict_readiness=args.strict_readiness,
        exit_on_error=args.exit_on_error,
        backend_config=_backend_config(args.backend_config),
        backend_directory=Path(args.backend_directory) if args.backend_directory else None,
        exit_timeout_secs=args.exit_timeout_secs,
        log_verbose=args.log_verbose,
        log_info=args.log_info,
        log_warning=args.log_warning,
        log_error=args.log_error,
        log_format=args.log_format,
        log_file=args.log_file,
        trace_config=_trace_flags(args),
        cache_config=_cache_flags(args),
        rate_limit=args.rate_limit,
        rate_limit_resource=args.rate_limit_resource,
        host_policies=_host_policies(args.host_policy),
        pinned_memory_pool_byte_size=args.pinned_memory_pool_byte_size,
        cuda_memory_pool_byte_size=dict(args.cuda_memory_pool_byte_size),
        allow_http=not vertex_mode if args.allow_http is None else args.allow_http,
        http_address=args.http_address,
        http_port=args.http_port,
        reuse_http_port=args.reuse_http_port,
        http_header_forward_pattern=args.http_header_forward_pattern,
        allow_sagemaker=args.allow_sagemaker,
        sagemaker_port=args.sagemaker_port,
        sagemaker_models_root=args.sagemaker_models_root,
        http_max_input_size=args.http_max_input_size,
        http_max_header_size=args.http_max_header_size,
        http_max_header_count=args.http_max_header_count,
        http_header_timeout_secs=args.http_header_timeout_secs,
        http_read_timeout_secs=args.http_read_timeout_secs,
        http_restricted_api=args.http_restricted_api,
        allow_client_shm=args.allow_client_shm,
        grpc_restricted_protocol=args.grpc_restricted_protocol,
        allow_grpc=not vertex_mode if args.allow_grpc is None else args.allow_grpc,
        allow_vertex_ai=vertex_mode if args.allow_vertex_ai is None else args.allow_vertex_ai,
        vertex_ai_port=args.vertex_ai_port or int(env.get("AIP_HTTP_PORT") or 8080),
        vertex_ai_default_model=args.vertex_ai_default_model,
        grpc_address=args.grpc_address,
        grpc_port=args.grpc_port,
        reuse_grpc_port=args.reuse_grpc_port,
        grpc_header_forward_pattern=args.grpc_header_forward_pattern,
        grpc_implementation=args.grpc_implementation,
        grpc_use_ssl=args.grpc_use_ssl,
        grpc_use_ssl_mutual=args.grpc_use_ssl_mutual,
        grpc_server_cert=args.grpc_server_cert,
        grpc_server_key=args.grpc_server_key,
        grpc_root_cert=args.grpc_root_cert,
        grpc_keepalive_time=args.grpc_keepalive_time,
        grpc_keepalive_timeout=args.grpc_keepalive_timeout,
        grpc_keepalive_permit_without_calls=args.grpc_keepalive_permit_without_calls,
        grpc_http2_max_pings_without_data=args.grpc_http2_max_pings_without_data,
        grpc_http2_min_recv_ping_interval_without_data=args.grpc_http2_min_recv_ping_interval_without_data,
        grpc_http2_max_ping_strikes=args.grpc_http2_max_ping_strikes,
        grpc_max_message_size=args.grpc_max_message_size,
        grpc_max_concurrent_streams=args.grpc_max_concurrent_streams,
        grpc_http2_max_reset_burst=args.grpc_http2_max_reset_burst,
        grpc_http2_max_reset_rate=args.grpc_http2_max_reset_rate,
        grpc_max_connection_idle=args.grpc_max_connection_idle,
        grpc_max_connection_age=args.grpc_max_connection_age,
        grpc_max_connection_age_grace=args.grpc_max_connection_age_grace,
        grpc_max_connections=args.grpc_max_connections,
        grpc_connection_buffer_limit=args.grpc_connection_buffer_limit,
        grpc_stream_max_inflight=args.grpc_stream_max_inflight,
        frontend_workers=args.frontend_workers,
        allow_metrics=args.allow_metrics,
        allow_cpu_metrics=args.allow_cpu_metrics,
        allow_gpu_metrics=args.allow_gpu_metrics,
        metrics_port=args.metrics_port,
        metrics_address=args.metrics_address,
        metrics_interval_ms=args.metrics_interval_ms,
        metrics_config=args.metrics_config,
        server_id=args.server_id,
    )


def _list_backends(check: bool) -> int:
    from .runtime.backends import BackendRegistry
    from .serving import format_table

    registry = BackendRegistry()
    rows = [("Backend", "Package", "Version", "Status")]
    for entry in registry.entries():
        status = "discovered"
        if check:
            try:
                registry.hooks(entry.name)
                status = "ok"
            except Exception as exc:  # report any failure as a row, keep listing
                status = f"error: {exc}"
        rows.append((entry.name, entry.distribution, entry.version, status))
    if len(rows) == 1:
        print(
            "no backends installed: pip install ./plugins/onnx (or ./plugins/python, ./plugins/fil, ...) "
            "from a clone of tritonpy, or pip install --find-links DIR tritonpy-backend-onnx with the "
            "wheels that ./dev wheels DIR builds"
        )
        return 0
    print(format_table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "backends":
        return _list_backends(args.check)
    if args.command == "ray":
        from .rayserve import main as ray_main

        if args.max_replicas is not None and args.min_replicas is None:
            args.min_replicas = 1
        return ray_main(args)
    if args.command == "new-backend":
        from .scaffold import main as new_backend

        return new_backend(args.name, args.directory)
    for line in deprecations(args):
        print(line, file=sys.stderr)
    refused = refusal(args)
    if refused is not None:
        print(f"error: {refused}", file=sys.stderr)
        return 1
    options = options_from_args(args)
    from tritonpy_sdk import TritonError

    from .repository import repository_path_error
    from .repository.remote import RemoteRepositoryError, is_remote
    from .server import Server
    from .serving import run

    for path in options.model_repository:
        error = None if is_remote(path) else repository_path_error(Path(path))
        if error is not None:
            print(f"error: {error}", file=sys.stderr)
            return 1
    try:
        server = Server(options)
    except TritonError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except RemoteRepositoryError as exc:  # an object store's client could not be set up
        print(f"error: {exc}", file=sys.stderr)
        return 1
    server.log_settings.install(("tritonpy", "uvicorn"))
    for line in notices(args):
        logging.getLogger("tritonpy.cli").warning("%s", line)
    try:
        return run(server)
    except KeyboardInterrupt:
        return 130
    except RemoteRepositoryError as exc:  # an object store that did not answer at start
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
