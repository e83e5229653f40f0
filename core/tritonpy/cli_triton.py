"""tritonserver flags that tritonpy takes so that a Triton command line starts unchanged,
though they change nothing here, and the combinations it refuses as tritonserver does.

``NO_EFFECT`` flags tune machinery tritonpy does not have (thread pools of a C++ server,
shared-library folders, GPU address space); each one given is said once in the log at
start, with why.
"""

from __future__ import annotations

import argparse

#: flag -> (its value's metavar, why it changes nothing in tritonpy).
NO_EFFECT: dict[str, tuple[str, str]] = {
    "--http-thread-count": (
        "N",
        "HTTP is served on an event loop, not by a pool of threads (more cores: --frontend-workers)",
    ),
    "--grpc-infer-allocation-pool-size": ("N", "request and response objects are not pooled"),
    "--grpc-infer-response-compression-level": (
        "LEVEL",
        "responses are sent uncompressed (compressed requests are read)",
    ),
    "--buffer-manager-thread-count": ("N", "tensor copies are made on the thread that needs them"),
    "--cache-directory": ("DIR", "response caches are Python plugins (entry-point group tritonpy.caches)"),
    "--repoagent-directory": ("DIR", "shared-library repository agents are not run (checksum is built in)"),
    "--enable-peer-access": ("BOOL", "GPU peer access is left as CUDA sets it"),
    "--cuda-virtual-address-size": ("GPU:BYTES", "implicit state is not kept in growable CUDA memory"),
    "--min-supported-compute-capability": ("X.Y", "every GPU CUDA reports is used"),
    "--model-load-gpu-limit": ("GPU:FRACTION", "a load is not refused for the GPU memory in use"),
    "--sagemaker-thread-count": ("N", "the SageMaker front end is served on the event loop"),
    "--vertex-ai-thread-count": ("N", "the Vertex AI front end is served on the event loop"),
}

#: The values tritonserver takes for ``--grpc-infer-response-compression-level``.
_COMPRESSION_LEVELS = ("none", "low", "medium", "high")


def add_triton_flags(serve: argparse.ArgumentParser) -> None:
    """Add the ``NO_EFFECT`` flags to the ``serve`` parser."""
    group = serve.add_argument_group(
        "tritonserver flags without effect in tritonpy",
        "taken so that a Triton command line starts unchanged; each one given is logged at start",
    )
    for flag, (metavar, why) in NO_EFFECT.items():
        group.add_argument(flag, metavar=metavar, default=None, help=f"no effect: {why}")


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def refusal(args: argparse.Namespace) -> str | None:
    """Why the server must not start with ``args`` (both cache flags, a front end outside
    the SageMaker safe port range, or a compression level tritonserver does not take), or
    None, in tritonserver's words."""
    if getattr(args, "response_cache_byte_size", None) is not None and getattr(args, "cache_config", None):
        return (
            "Error: Incompatible flags --response-cache-byte-size and --cache-config both provided. "
            "Please provide one or the other."
        )
    unsafe = _outside_safe_range(args)
    if unsafe is not None:
        return unsafe
    level = getattr(args, "grpc_infer_response_compression_level", None)
    if level is not None and level.lower() not in _COMPRESSION_LEVELS:
        return (
            f"invalid argument for --grpc-infer-response-compression-level: '{level}' "
            f"(one of {', '.join(_COMPRESSION_LEVELS)})"
        )
    return None


def _outside_safe_range(args: argparse.Namespace) -> str | None:
    """With ``--allow-sagemaker``, a front end whose port is outside
    ``--sagemaker-safe-port-range``, in tritonserver's words; a range that is not one."""
    given = getattr(args, "sagemaker_safe_port_range", None)
    if given is None or not getattr(args, "allow_sagemaker", False):
        return None
    low, sep, high = given.partition("-")
    if not sep or not low.strip().isdigit() or not high.strip().isdigit():
        return f"--sagemaker-safe-port-range expects <integer>-<integer>, got '{given}'"
    bounds = int(low), int(high)
    for service, allowed, port in (
        ("HTTP", args.allow_http is not False, args.http_port),
        ("GRPC", args.allow_grpc is not False, args.grpc_port),
        ("metrics", args.allow_metrics, args.metrics_port),
    ):
        if allowed and not bounds[0] <= port <= bounds[1]:
            return (
                f"The server cannot listen to {service} requests at port {port}, allowed port range is "
                f"[{bounds[0]}, {bounds[1]}]"
            )
    return None


#: tritonserver's older flags: flag → the warning it prints when one is given (Triton 2.51's words).
DEPRECATED: dict[str, str] = {
    "--strict-model-config": "Warning: '--strict-model-config' has been deprecated! Please use "
    "'--disable-auto-complete-config' instead.",
    "--trace-file": "Warning: '--trace-file' has been deprecated and will be removed in future releases. "
    "Please use '--trace-config triton,file=<filepath> instead.",
    "--trace-level": "Warning: '--trace-level' has been deprecated and will be removed in future releases. "
    "Please use '--trace-config level=<OFF|TIMESTAMPS|TENSORS> instead.",
    "--trace-rate": "Warning: '--trace-rate' has been deprecated and will be removed in future releases. "
    "Please use '--trace-config rate=<rate value> instead.",
    "--trace-count": "Warning: '--trace-count' has been deprecated and will be removed in future releases. "
    "Please use '--trace-config count=<count value> instead.",
    "--trace-log-frequency": "Warning: '--trace-log-frequency' has been deprecated and will be removed in "
    "future releases. Please use '--trace-config triton,log-frequency=<log frequency value> instead.",
    "--response-cache-byte-size": "Warning: '--response-cache-byte-size' has been deprecated! This will "
    "default to the 'local' cache implementation with the provided byte size for its config. Please use "
    "'--cache-config' instead. The equivalent --cache-config CLI args would be: "
    "'--cache-config=local,size={value}'",
}


def deprecations(args: argparse.Namespace) -> list[str]:
    """tritonserver's warnings (on standard error, before anything starts) for the older
    flags given, and for those a newer flag overrides, in its words."""
    lines = [
        text.format(value=getattr(args, _dest(flag)))
        for flag, text in DEPRECATED.items()
        if getattr(args, _dest(flag), None) is not None
    ]
    if args.disable_auto_complete_config and args.strict_model_config is False:
        lines.append(
            "Warning: Overriding deprecated '--strict-model-config' from False to True in favor of "
            "'--disable-auto-complete-config'!"
        )
    settings = {item.partition("=")[0] for item in args.trace_config if "," not in item.partition("=")[0]}
    if "rate" in settings and args.trace_rate is not None:
        lines.append(
            "Warning: Overriding deprecated '--trace-rate' in favor of provided rate value in --trace-config!"
        )
    if "level" in settings and args.trace_level is not None:
        lines.append(
            "Warning: Overriding deprecated '--trace-level' in favor of provided level in --trace-config!"
        )
    return lines


def notices(args: argparse.Namespace) -> list[str]:
    """One line for each ``NO_EFFECT`` flag given."""
    lines = []
    for flag, (_, why) in NO_EFFECT.items():
        value = getattr(args, _dest(flag), None)
        if value is None:
            continue
        if flag == "--grpc-infer-response-compression-level" and value.lower() == "none":
            continue  # what tritonpy does anyway
        lines.append(f"{flag}={value} has no effect in tritonpy: {why}")
    return lines
