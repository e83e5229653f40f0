"""``ServerOptions``: every server setting in one typed object.

One field per ``tritonserver`` flag that tritonpy implements; the CLI only
parses flags into this object, and the in-process API takes it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ServerOptions:
    """Settings of a tritonpy server. Field names follow tritonserver's flags."""

    #: ``--model-repository``: one or more repository roots.
    model_repository: list[Path] = field(default_factory=list)
    #: ``--model-control-mode``: only ``none`` (load everything at start) so far.
    model_control_mode: str = "none"
    #: ``--strict-model-config``/``--disable-auto-complete-config``: when true,
    #: backends do not fill in missing config fields.
    disable_auto_complete_config: bool = False
    #: ``--strict-readiness``: the server is not ready while any model failed.
    strict_readiness: bool = True
    #: ``--exit-on-error``: exit at start if any model failed to load.
    exit_on_error: bool = True
    #: ``--backend-config=<backend>,<key>=<value>`` (global when backend is empty).
    backend_config: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``--exit-timeout-secs``: how long shutdown waits for in-flight requests.
    exit_timeout_secs: float = 30.0
    #: ``--log-verbose``: verbosity level (0 = off).
    log_verbose: int = 0
    #: ``--allow-http``.
    allow_http: bool = True
    #: ``--http-address``.
    http_address: str = "0.0.0.0"
    #: ``--http-port``.
    http_port: int = 8000
    #: Largest request body the HTTP front end accepts, in bytes
    #: (``--http-max-input-size``, Triton's default 64 MiB).
    http_max_input_size: int = 64 * 1024 * 1024
    #: ``--id``: the server name reported by server metadata.
    server_id: str = "tritonpy"
