"""``ServerOptions``: every server setting in one typed object.

One field per ``tritonserver`` flag that tritonpy implements; the CLI only
parses flags into this object, and the in-process API takes it directly. Fields
can also be set by the names of ``tritonserver``'s ``Options``
(``tritonserver_options.py``): ``Options(startup_models=["m"])``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .hostpolicy import HostPolicy
from .tritonserver_options import translate


@dataclass
class ServerOptions:
    """Settings of a tritonpy server. Field names follow tritonserver's flags; setting
    an attribute by ``tritonserver``'s ``Options`` name sets the field it means."""

    def __setattr__(self, key: str, value: Any) -> None:
        found = translate(key, value)
        if found is None:  # one of tritonserver's that has no effect here
            return
        name, converted = found
        if name not in _FIELDS:
            raise TypeError(f"unknown server option '{key}'")
        object.__setattr__(self, name, converted)

    #: ``--model-repository``: one or more repository roots: local folders (``Path``), or
    #: object-store URIs kept as strings (``s3://bucket/prefix``, ``gs://``, ``as://``;
    #: ``repository/remote.py``), read into a local cache folder.
    model_repository: list[Path | str] = field(default_factory=list)
    #: ``--model-control-mode``: ``none`` (load every model at start), ``explicit``
    #: (load ``load_model`` at start, then the load/unload API) or ``poll``
    #: (load every model, then follow the repositories' changes).
    model_control_mode: str = "none"
    #: ``--load-model``: models explicit mode loads at start (``*``: every model).
    load_model: list[str] = field(default_factory=list)
    #: ``--repository-poll-secs``: seconds between polls in poll mode.
    repository_poll_secs: float = 15.0
    #: ``--model-load-thread-count``: how many models load at once.
    model_load_thread_count: int = 4
    #: ``--model-load-retry-count``: more tries for a model version that failed to load.
    model_load_retry_count: int = 0
    #: ``--model-config-name``: read each model's config from its folder's
    #: ``configs/<name>.pbtxt`` where there is one (else its ``config.pbtxt``).
    model_config_name: str = ""
    #: ``--model-namespacing``: each repository root is a namespace, so one model name
    #: may be in several roots (``repository/namespaces.py``).
    model_namespacing: bool = False
    #: ``--strict-model-config``/``--disable-auto-complete-config``: when true,
    #: backends do not fill in missing config fields.
    disable_auto_complete_config: bool = False
    #: ``--strict-readiness``: the server is not ready while any model failed.
    strict_readiness: bool = True
    #: ``--exit-on-error``: exit at start if any model failed to load.
    exit_on_error: bool = True
    #: ``--backend-config=<backend>,<key>=<value>`` (global when backend is empty).
    backend_config: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``--backend-directory``: where Python-based backends live (``<dir>/<backend>/model.py``).
    backend_directory: Path | None = None
    #: ``--exit-timeout-secs``: how long shutdown waits for in-flight requests.
    exit_timeout_secs: float = 30.0
    #: ``--log-verbose``: verbosity level (0 = off).
    log_verbose: int = 0
    #: ``--log-info``, ``--log-warning``, ``--log-error``: which severities are written.
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    #: ``--log-format``: ``default`` or ``ISO8601``.
    log_format: str = "default"
    #: ``--log-file``: write the log there instead of standard error.
    log_file: str = ""
    #: ``--allow-http``.
    allow_http: bool = True
    #: ``--http-address``.
    http_address: str = "0.0.0.0"
    #: ``--http-port``.
    http_port: int = 8000
    #: ``--reuse-http-port``: bind the HTTP port with ``SO_REUSEPORT``, so several servers
    #: (each with this set) share it and the kernel spreads connections among them.
    reuse_http_port: bool = False
    #: ``--http-header-forward-pattern``: request headers whose name matches this regular
    #: expression (a search, case-insensitive unless it starts with ``(?-i)``) reach the
    #: model as string request parameters.
    http_header_forward_pattern: str = ""
    #: Largest request body the HTTP front end accepts, in bytes
    #: (``--http-max-input-size``, Triton's default 64 MiB).
    http_max_input_size: int = 64 * 1024 * 1024
    #: ``--http-max-header-size``: largest request line plus headers of one HTTP
    #: request, in bytes; a larger head is answered 431 and the connection closed.
    http_max_header_size: int = 64 * 1024
    #: ``--http-max-header-count``: most header fields in one HTTP request (431 past it).
    http_max_header_count: int = 128
    #: ``--http-header-timeout-secs``: a request's line and headers must arrive within
    #: this many seconds of its first byte, else the connection is closed (slow clients).
    http_header_timeout_secs: float = 30.0
    #: ``--http-read-timeout-secs``: an incomplete request body that sends nothing for
    #: this many seconds is dropped and its connection closed.
    http_read_timeout_secs: float = 60.0
    #: ``--http-restricted-api <api>[,<api>...]:<header>=<value>``: API groups that
    #: answer only requests carrying that header (Triton's flag).
    http_restricted_api: list[str] = field(default_factory=list)
    #: ``--allow-client-shm``: let clients register and unregister system and CUDA
    #: shared-memory regions (and so use them for inputs and outputs). Off by default,
    #: as in Triton since 26.05: a region maps the server host's memory.
    allow_client_shm: bool = False
    #: ``--id``: the server name reported by server metadata (Triton's default, "triton").
    server_id: str = "triton"
    #: ``--allow-sagemaker``: serve Triton's SageMaker routes (``/ping``, ``/invocations``)
    #: on ``sagemaker_port``, at the HTTP address (``http/sagemaker.py``).
    allow_sagemaker: bool = False
    #: ``--sagemaker-port``.
    sagemaker_port: int = 8080
    #: ``--sagemaker-models-root`` (tritonpy's own): where SageMaker unpacks the models of a
    #: multi-model endpoint; a load's ``url`` must be ``<root>/<hash>/model[/<folder>]``.
    sagemaker_models_root: str = "/opt/ml/models"
    #: ``--allow-vertex-ai``: serve Triton's Vertex AI routes (``AIP_HEALTH_ROUTE``,
    #: ``AIP_PREDICT_ROUTE``) on ``vertex_ai_port``, at the HTTP address (``http/vertex.py``).
    allow_vertex_ai: bool = False
    #: ``--vertex-ai-port`` (the CLI's default: ``AIP_HTTP_PORT``, else 8080).
    vertex_ai_port: int = 8080
    #: ``--vertex-ai-default-model``: the model predict requests infer with (empty: the
    #: repository's only model).
    vertex_ai_default_model: str = ""
    #: ``--allow-grpc``.
    allow_grpc: bool = True
    #: ``--grpc-address``.
    grpc_address: str = "0.0.0.0"
    #: ``--grpc-port``.
    grpc_port: int = 8001
    #: ``--reuse-grpc-port``: as ``reuse_http_port``, for the gRPC port.
    reuse_grpc_port: bool = False
    #: ``--grpc-header-forward-pattern``: as ``http_header_forward_pattern``, for gRPC metadata.
    grpc_header_forward_pattern: str = ""
    #: ``--grpc-implementation``: ``tritonpy`` (HTTP/2 on the server's asyncio loop) or
    #: ``grpcio`` (grpc.aio, with the ``grpcio`` extra installed).
    grpc_implementation: str = "tritonpy"
    #: ``--grpc-use-ssl``: serve gRPC over TLS with the certificate and key below.
    grpc_use_ssl: bool = False
    #: ``--grpc-use-ssl-mutual``: also require client certificates signed by the root cert.
    grpc_use_ssl_mutual: bool = False
    #: ``--grpc-server-cert``: PEM file of the server certificate.
    grpc_server_cert: str = ""
    #: ``--grpc-server-key``: PEM file of the server key.
    grpc_server_key: str = ""
    #: ``--grpc-root-cert``: PEM file of the CA that signs client certificates (mutual TLS).
    grpc_root_cert: str = ""
    #: ``--grpc-keepalive-time``: ms between keepalive pings (Triton's default 7200000).
    grpc_keepalive_time: int = 7_200_000
    #: ``--grpc-keepalive-timeout``: ms to wait for a keepalive ack (default 20000).
    grpc_keepalive_timeout: int = 20_000
    #: ``--grpc-keepalive-permit-without-calls``.
    grpc_keepalive_permit_without_calls: bool = False
    #: ``--grpc-http2-max-pings-without-data`` (default 2).
    grpc_http2_max_pings_without_data: int = 2
    #: ``--grpc-http2-min-recv-ping-interval-without-data``: ms (default 300000).
    grpc_http2_min_recv_ping_interval_without_data: int = 300_000
    #: ``--grpc-http2-max-ping-strikes`` (default 2).
    grpc_http2_max_ping_strikes: int = 2
    #: ``--grpc-max-concurrent-streams``: calls one connection may have in flight (default 1000);
    #: a call reset by the client counts until its handler has ended.
    grpc_max_concurrent_streams: int = 1000
    #: ``--grpc-http2-max-reset-burst`` / ``--grpc-http2-max-reset-rate``: stream resets a
    #: client may cause in a burst and per second after it, before GOAWAY ENHANCE_YOUR_CALM
    #: (a token bucket, nghttp2's defaults 1000 and 33; burst 0: no limit; native transport).
    grpc_http2_max_reset_burst: int = 1000
    grpc_http2_max_reset_rate: int = 33
    #: ``--grpc-max-connection-idle``: ms without calls before a connection is closed
    #: (GOAWAY NO_ERROR); 0: never (grpc core's max_connection_idle, infinite by default).
    grpc_max_connection_idle: int = 0
    #: ``--grpc-max-connection-age``: ms after which a connection is told to go away; 0: never.
    grpc_max_connection_age: int = 0
    #: ``--grpc-max-connection-age-grace``: ms the calls of a connection past its age may
    #: still take before it is closed; 0: no limit.
    grpc_max_connection_age_grace: int = 0
    #: ``--grpc-max-connections``: open gRPC connections at most; one more gets GOAWAY
    #: ENHANCE_YOUR_CALM and is closed; 0: no limit (native transport).
    grpc_max_connections: int = 0
    #: ``--grpc-max-message-size``: largest gRPC message in bytes either way (default 2 GiB - 1).
    grpc_max_message_size: int = 2**31 - 1
    #: ``--grpc-connection-buffer-limit``: bytes one native-transport connection may hold of
    #: request data no handler has taken yet and of responses queued for its client; at
    #: the limit its client is flow-controlled (tritonpy's own flag; default 64 MiB).
    grpc_connection_buffer_limit: int = 1 << 26
    #: ``--grpc-stream-max-inflight``: requests of one ModelStreamInfer stream in the
    #: server at once; the next is read when one completes (tritonpy's own flag; default 128).
    grpc_stream_max_inflight: int = 128
    #: ``--frontend-workers``: processes that serve the HTTP and gRPC ports in front of
    #: this one, which runs the models (tritonpy's own flag; 1: this process serves them).
    frontend_workers: int = 1
    #: ``--grpc-restricted-protocol <protocol>[,<protocol>...]:<header>=<value>``: API
    #: groups that answer only calls carrying ``triton-grpc-protocol-<header>`` (Triton's flag).
    grpc_restricted_protocol: list[str] = field(default_factory=list)
    #: ``--allow-metrics``: serve Prometheus metrics.
    allow_metrics: bool = True
    #: ``--allow-cpu-metrics``.
    allow_cpu_metrics: bool = True
    #: ``--allow-gpu-metrics`` (only where NVML finds a GPU).
    allow_gpu_metrics: bool = True
    #: ``--metrics-port``.
    metrics_port: int = 8002
    #: ``--metrics-address``; empty means the HTTP address, as Triton does.
    metrics_address: str = ""
    #: ``--metrics-interval-ms``: how often CPU/GPU gauges are refreshed.
    metrics_interval_ms: int = 2000
    #: ``--metrics-config key=value`` settings (summary_latencies, histogram_latencies, ...).
    metrics_config: list[str] = field(default_factory=list)
    #: ``--trace-config``: ``level=TIMESTAMPS``, ``rate=N``, ``count=N``,
    #: ``log-frequency=N``, ``mode=triton|opentelemetry``, ``triton,file=PATH``,
    #: ``opentelemetry,url=URL`` (and ``resource=``, ``bsp_*=``; see ``trace.parse_flags``).
    trace_config: list[str] = field(default_factory=list)
    #: ``--cache-config <cache>,<key>=<value>``: the response cache (``local,size=N``).
    cache_config: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``--rate-limit``: ``off`` or ``execution_count`` (instances wait for their resources).
    rate_limit: str = "off"
    #: ``--rate-limit-resource <name>:<count>[:<device>]``.
    rate_limit_resource: list[str] = field(default_factory=list)
    #: ``--host-policy <name>,<setting>=<value>``: CPU cores and NUMA nodes that bind the
    #: instances of that policy name (``hostpolicy.py``).
    host_policies: dict[str, HostPolicy] = field(default_factory=dict)
    #: ``--pinned-memory-pool-byte-size``: page-locked host memory for batches of
    #: GPU instances (Triton's default 256 MiB; 0: pageable memory only).
    pinned_memory_pool_byte_size: int = 268_435_456
    #: ``--cuda-memory-pool-byte-size <gpu>:<bytes>``: each GPU's device memory
    #: pool; GPUs not named get Triton's default, 64 MiB (0: no pool).
    cuda_memory_pool_byte_size: dict[int, int] = field(default_factory=dict)


_FIELDS = frozenset(f.name for f in fields(ServerOptions))


class Options(ServerOptions):
    """``tritonpy.Options(**settings)``: ``ServerOptions`` by tritonpy's names or by
    ``tritonserver``'s (``Options(model_repository="models", startup_models=["m"])``)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__()
        for key, value in settings.items():
            setattr(self, key, value)
