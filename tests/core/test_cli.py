"""The command line's own behaviour (its flags are checked against the docs in tests/test_docs.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tritonpy.cli import build_parser, main, options_from_args
from tritonpy.cli_triton import deprecations, notices, refusal
from tritonpy.hostpolicy import HostPolicy


def test_serve_without_a_repository_says_what_is_missing_in_a_few_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["serve"])
    assert exit.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "usage: tritonpy serve --model-repository PATH [options]",
        "tritonpy serve: error: the following arguments are required: --model-repository/--model-store",
        "(`tritonpy serve --help` lists every option)",
    ]


def test_a_short_usage_is_printed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([])
    err = capsys.readouterr().err
    assert err.startswith("usage: tritonpy [-h] [--version] {serve,backends,ray,new-backend}")
    assert len(err.splitlines()) == 3


#: Every flag of ``tritonserver --help`` (Triton 2.51), with a value it takes.
TRITONSERVER_FLAGS = {
    "--id": "triton",
    "--exit-timeout-secs": "30",
    "--log-verbose": "0",
    "--log-info": "true",
    "--log-warning": "true",
    "--log-error": "true",
    "--log-format": "default",
    "--log-file": "",
    "--model-store": "repo",
    "--model-repository": "repo",
    "--exit-on-error": "true",
    "--disable-auto-complete-config": "true",
    "--strict-readiness": "true",
    "--model-control-mode": "none",
    "--repository-poll-secs": "15",
    "--load-model": "m",
    "--model-config-name": "h100",
    "--model-load-thread-count": "4",
    "--model-load-retry-count": "0",
    "--model-namespacing": "false",
    "--enable-peer-access": "true",
    "--allow-http": "true",
    "--http-address": "0.0.0.0",
    "--http-port": "8000",
    "--reuse-http-port": "false",
    "--http-header-forward-pattern": "PREFIX_.*",
    "--http-thread-count": "8",
    "--http-restricted-api": "model-repository:admin-key=secret",
    "--allow-grpc": "true",
    "--grpc-address": "0.0.0.0",
    "--grpc-port": "8001",
    "--reuse-grpc-port": "false",
    "--grpc-header-forward-pattern": "PREFIX_.*",
    "--grpc-infer-allocation-pool-size": "8",
    "--grpc-use-ssl": "false",
    "--grpc-use-ssl-mutual": "false",
    "--grpc-server-cert": "",
    "--grpc-server-key": "",
    "--grpc-root-cert": "",
    "--grpc-infer-response-compression-level": "none",
    "--grpc-keepalive-time": "7200000",
    "--grpc-keepalive-timeout": "20000",
    "--grpc-keepalive-permit-without-calls": "false",
    "--grpc-http2-max-pings-without-data": "2",
    "--grpc-http2-min-recv-ping-interval-without-data": "300000",
    "--grpc-http2-max-ping-strikes": "2",
    "--grpc-max-connection-age": "0",
    "--grpc-max-connection-age-grace": "0",
    "--grpc-restricted-protocol": "model-repository:admin-key=secret",
    "--allow-sagemaker": "false",
    "--allow-client-shm": "true",
    "--sagemaker-port": "8080",
    "--sagemaker-safe-port-range": "8081-8085",
    "--sagemaker-thread-count": "8",
    "--allow-vertex-ai": "false",
    "--vertex-ai-port": "8080",
    "--vertex-ai-thread-count": "8",
    "--vertex-ai-default-model": "m",
    "--allow-metrics": "true",
    "--allow-gpu-metrics": "true",
    "--allow-cpu-metrics": "true",
    "--metrics-address": "0.0.0.0",
    "--metrics-port": "8002",
    "--metrics-interval-ms": "2000",
    "--metrics-config": "summary_latencies=true",
    "--trace-config": "rate=100",
    "--backend-directory": "backends",
    "--backend-config": "onnxruntime,default-max-batch-size=4",
    "--repoagent-directory": "repoagents",
    "--cache-config": "local,size=1048576",
    "--cache-directory": "caches",
    "--rate-limit": "off",
    "--rate-limit-resource": "R1:4",
    "--pinned-memory-pool-byte-size": "268435456",
    "--cuda-memory-pool-byte-size": "0:67108864",
    "--cuda-virtual-address-size": "0:1073741824",
    "--min-supported-compute-capability": "6.0",
    "--buffer-manager-thread-count": "0",
    "--host-policy": "gpu0,numa-node=0",
    "--model-load-gpu-limit": "0:0.8",
    "--strict-model-config": "false",
    "--response-cache-byte-size": "0",
    "--trace-file": "trace.json",
    "--trace-level": "TIMESTAMPS",
    "--trace-rate": "1000",
    "--trace-count": "-1",
    "--trace-log-frequency": "0",
}


def test_every_tritonserver_flag_is_taken() -> None:
    """A Triton command line starts unchanged: each flag of tritonserver parses, in its
    ``--flag=value`` form, and none of these values is refused (but the two cache flags
    together, which tritonserver refuses too)."""
    flags = {f: v for f, v in TRITONSERVER_FLAGS.items() if f != "--response-cache-byte-size"}
    argv = ["serve", *(f"{flag}={value}" for flag, value in flags.items())]
    args = build_parser().parse_args(argv)
    assert refusal(args) is None
    options = options_from_args(args)
    assert options.model_config_name == "h100"
    assert options.http_header_forward_pattern == options.grpc_header_forward_pattern == "PREFIX_.*"
    # The older trace flags first: --trace-config overrides them, as in tritonserver.
    assert options.trace_config == [
        "triton,file=trace.json",
        "level=TIMESTAMPS",
        "rate=1000",
        "count=-1",
        "log-frequency=0",
        "rate=100",
    ]
    both = build_parser().parse_args([*argv, "--response-cache-byte-size=0"])
    assert refusal(both) == (
        "Error: Incompatible flags --response-cache-byte-size and --cache-config both provided. "
        "Please provide one or the other."
    )
    assert options.host_policies == {"gpu0": HostPolicy("gpu0", numa_node=0)}
    assert options.model_namespacing is False
    assert options.allow_client_shm is True
    plain = build_parser().parse_args(["serve", "--model-repository", "r"])
    assert options_from_args(plain).allow_client_shm is False  # Triton's default since 26.05
    for given in ("--model-namespacing", "--model-namespacing=true"):
        args = build_parser().parse_args(["serve", "--model-repository", "r", given])
        assert refusal(args) is None and options_from_args(args).model_namespacing is True


def test_older_flags_warn_as_tritonserver_warns() -> None:
    argv = ["serve", "--model-repository", "r", "--strict-model-config=false"]
    argv.append("--disable-auto-complete-config")
    args = build_parser().parse_args([*argv, "--trace-rate=5", "--trace-config", "rate=7"])
    assert deprecations(args) == [
        "Warning: '--strict-model-config' has been deprecated! Please use '--disable-auto-complete-config' "
        "instead.",
        "Warning: '--trace-rate' has been deprecated and will be removed in future releases. Please use "
        "'--trace-config rate=<rate value> instead.",
        "Warning: Overriding deprecated '--strict-model-config' from False to True in favor of "
        "'--disable-auto-complete-config'!",
        "Warning: Overriding deprecated '--trace-rate' in favor of provided rate value in --trace-config!",
    ]
    options = options_from_args(args)
    assert options.disable_auto_complete_config is True  # the newer flag wins
    assert options.trace_config == ["rate=5", "rate=7"]  # the last one counts
    cache = build_parser().parse_args(["serve", "--model-repository", "r", "--response-cache-byte-size=64"])
    assert deprecations(cache)[0].endswith("would be: '--cache-config=local,size=64'")
    assert options_from_args(cache).cache_config == {"local": {"size": "64"}}
    plain = build_parser().parse_args(["serve", "--model-repository", "r"])
    assert deprecations(plain) == []


def test_flags_without_effect_are_said_once_each() -> None:
    args = build_parser().parse_args(
        ["serve", "--model-repository", "r", "--http-thread-count", "16", "--enable-peer-access=false"]
    )
    assert notices(args) == [
        "--http-thread-count=16 has no effect in tritonpy: HTTP is served on an event loop, not by a "
        "pool of threads (more cores: --frontend-workers)",
        "--enable-peer-access=false has no effect in tritonpy: GPU peer access is left as CUDA sets it",
    ]


def test_host_policies_are_parsed_with_tritonservers_checks() -> None:
    argv = ["serve", "--model-repository", "r"]
    flags = [
        "--host-policy=cpu,cpu-cores=0-1,4-5",
        "--host-policy=cpu,numa-node=0",
        "--host-policy=gpu_1,numa-node=1",
    ]
    options = options_from_args(build_parser().parse_args(argv + flags))
    assert options.host_policies == {
        "cpu": HostPolicy("cpu", frozenset({0, 1, 4, 5}), 0),
        "gpu_1": HostPolicy("gpu_1", numa_node=1),
    }
    for flag, message in [
        ("--host-policy=cpu", "--host-policy option format is '<policy name>,<setting>=<value>'. Got cpu"),
        ("--host-policy=cpu,cpu-cores", "format is '<policy name>,<setting>=<value>'. Got cpu,cpu-cores"),
        (
            "--host-policy=cpu,cores=1",
            "setting host policy: Unsupported host policy setting 'cores' is specified, supported settings "
            "are 'numa-node', 'cpu-cores'",
        ),
        (
            "--host-policy=cpu,cpu-cores=3",
            "host policy setting 'cpu-cores' format is '<lower_cpu_core_id>-<upper_cpu_core_id>'. Got 3",
        ),
        ("--host-policy=cpu,numa-node=x", "Parsing 'numa-node' value: Can't parse 'x' to integer"),
    ]:
        with pytest.raises(SystemExit, match=re.escape(message)):
            options_from_args(build_parser().parse_args([*argv, flag]))
    assert notices(build_parser().parse_args(["serve", "--model-repository", "r"])) == []


def test_a_vertex_ai_deployment_serves_vertex_ai_alone_unless_told_otherwise() -> None:
    """As tritonserver: ``AIP_MODE=PREDICTION`` turns the Vertex AI front end on (on
    ``AIP_HTTP_PORT``) and HTTP and gRPC off; their flags still win."""
    vertex = {"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "9090"}
    plain = options_from_args(build_parser().parse_args(["serve", "--model-repository", "r"]), vertex)
    assert (plain.allow_vertex_ai, plain.allow_http, plain.allow_grpc, plain.vertex_ai_port) == (
        True,
        False,
        False,
        9090,
    )
    argv = ["serve", "--model-repository", "r", "--allow-http=true", "--allow-vertex-ai=false"]
    told = options_from_args(build_parser().parse_args(argv), vertex)
    assert (told.allow_vertex_ai, told.allow_http, told.allow_grpc) == (False, True, False)
    elsewhere = options_from_args(build_parser().parse_args(["serve", "--model-repository", "r"]), {})
    assert (elsewhere.allow_vertex_ai, elsewhere.allow_http, elsewhere.vertex_ai_port) == (False, True, 8080)


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (
            "--allow-sagemaker --sagemaker-safe-port-range=9000-9010 --http-port=9001 --grpc-port=9600",
            "The server cannot listen to GRPC requests at port 9600, allowed port range is [9000, 9010]",
        ),
        (
            "--allow-sagemaker --sagemaker-safe-port-range=9000",
            "--sagemaker-safe-port-range expects <integer>-<integer>, got '9000'",
        ),
        (
            "--grpc-infer-response-compression-level=max",
            "invalid argument for --grpc-infer-response-compression-level: 'max' (one of none, low, "
            "medium, high)",
        ),
    ],
)
def test_what_tritonserver_refuses_stops_it_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, message: str
) -> None:
    assert main(["serve", "--model-repository", str(tmp_path), *flag.split()]) == 1
    assert capsys.readouterr().err == f"error: {message}\n"
