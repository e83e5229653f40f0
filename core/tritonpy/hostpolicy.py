"""Host policies: binding model instances to CPU cores and NUMA nodes (Triton's
``--host-policy=<name>,<setting>=<value>``).

Each instance has a policy name: its instance group's ``host_policy``, else
``cpu`` for KIND_CPU, ``gpu_<id>`` for KIND_GPU and ``model`` for KIND_MODEL, as
in Triton. When ``--host-policy`` defines that name, the instance's threads are
bound by it: ``cpu-cores`` (``0-3,8-11``) sets their CPU affinity, ``numa-node``
their memory policy (``MPOL_BIND`` to that node). Linux applies both per thread,
and a thread or process started by a bound thread inherits them, so:

- an instance is initialized on a thread bound for the time of its
  ``instance_initialize``: the threads a framework starts then (onnxruntime's
  pools) and a Python model's stub process are bound for good;
- the scheduler's worker thread of the instance binds itself before its first
  execution; a model with bound instances never executes on a caller's thread.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tritonpy_sdk import TritonError

log = logging.getLogger("tritonpy.hostpolicy")

SETTINGS = ("numa-node", "cpu-cores")

#: ``set_mempolicy``'s syscall number (glibc has no wrapper; libnuma is not needed).
_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}.get(platform.machine())
_MPOL_DEFAULT = 0
_MPOL_BIND = 2


@dataclass(frozen=True)
class HostPolicy:
    """One named policy: the CPU cores its threads may run on and the NUMA node their
    memory comes from (None: not set)."""

    name: str
    cpus: frozenset[int] | None = None
    numa_node: int | None = None


def parse_flag(arg: str) -> tuple[str, str, str]:
    """``<policy>,<setting>=<value>`` as (policy, setting, value), or ValueError with
    tritonserver's words."""
    comma = arg.find(",")
    equals = arg.find("=", comma + 1) if comma >= 0 else -1
    name, setting, value = arg[:comma], arg[comma + 1 : equals], arg[equals + 1 :]
    if comma < 0 or equals < 0 or not (name and setting and value):
        raise ValueError(f"--host-policy option format is '<policy name>,<setting>=<value>'. Got {arg}")
    return name, setting, value


def build(flags: list[tuple[str, str, str]]) -> dict[str, HostPolicy]:
    """The policies ``flags`` (``parse_flag``'s triples) define; TritonError for an
    unknown setting (UNSUPPORTED, Triton's words) or a value that does not parse
    (INVALID_ARG, Triton's words; Triton finds those when an instance starts)."""
    settings: dict[str, dict[str, str]] = {}
    for name, setting, value in flags:
        if setting not in SETTINGS:
            raise TritonError.unsupported(
                f"Unsupported host policy setting '{setting}' is specified, supported settings are "
                "'numa-node', 'cpu-cores'"
            )
        settings.setdefault(name, {})[setting] = value
    return {
        name: HostPolicy(
            name,
            _cpu_cores(values["cpu-cores"]) if "cpu-cores" in values else None,
            _int("Parsing 'numa-node' value", values["numa-node"]) if "numa-node" in values else None,
        )
        for name, values in settings.items()
    }


def policy_name(kind: str, device_id: int, group_policy: str) -> str:
    """An instance's policy name, as Triton names it."""
    if group_policy:
        return group_policy
    return {"KIND_GPU": f"gpu_{device_id}", "KIND_MODEL": "model"}.get(kind, "cpu")


def _int(what: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TritonError.invalid_arg(f"{what}: Can't parse '{text}' to integer") from None


def _cpu_cores(text: str) -> frozenset[int]:
    """``a-b[,c-d...]`` (each part a range, as Triton requires) as a set of cores."""
    cpus: set[int] = set()
    for part in text.split(","):
        lower, dash, upper = part.partition("-")
        if not dash:
            raise TritonError.invalid_arg(
                "host policy setting 'cpu-cores' format is '<lower_cpu_core_id>-<upper_cpu_core_id>'. "
                f"Got {part}"
            )
        first = _int("Parsing 'cpu-cores' value", lower)
        cpus.update(range(first, _int("Parsing 'cpu-cores' value", upper) + 1))
    return frozenset(cpus)


def bind_thread(policy: HostPolicy) -> None:
    """Bind the calling thread (and what it starts from now on) by ``policy``."""
    if policy.cpus is not None:
        try:
            os.sched_setaffinity(0, policy.cpus)
        except (OSError, ValueError, OverflowError) as exc:  # a core this host lacks: EINVAL
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise TritonError.internal(f"Unable to set NUMA thread affinity: {reason}") from None
    if policy.numa_node is not None:
        _set_mempolicy(_MPOL_BIND, 1 << policy.numa_node)


def _set_mempolicy(mode: int, mask: int) -> None:
    if _SET_MEMPOLICY is None:
        raise TritonError.unsupported(f"NUMA memory policies are not supported on {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    nodemask = ctypes.c_ulong(mask)
    # maxnode: the bits of the mask the kernel reads (one word).
    pointer = ctypes.byref(nodemask) if mask else None
    if libc.syscall(_SET_MEMPOLICY, mode, pointer, ctypes.sizeof(nodemask) * 8 if mask else 0) != 0:
        reason = os.strerror(ctypes.get_errno() or errno.EINVAL)
        what = "set" if mode != _MPOL_DEFAULT else "reset"
        raise TritonError.internal(f"Unable to {what} NUMA memory policy: {reason}")


@contextmanager
def bound(policy: HostPolicy | None) -> Iterator[None]:
    """The calling thread bound by ``policy`` for the ``with`` block, then as it was."""
    if policy is None:
        yield
        return
    before = os.sched_getaffinity(0)
    bind_thread(policy)
    try:
        yield
    finally:
        if policy.cpus is not None:
            os.sched_setaffinity(0, before)
        if policy.numa_node is not None:
            _set_mempolicy(_MPOL_DEFAULT, 0)


class ThreadBinder:
    """Binds each worker thread by its instance's policy before the thread's first
    execution (once per thread: later calls are one attribute read)."""

    def __init__(self, policies: dict[str, HostPolicy]) -> None:
        #: Instance name -> its policy (only the instances that have one).
        self.policies = policies
        self._local = threading.local()

    def bind(self, instance_name: str) -> None:
        policy = self.policies.get(instance_name)
        if policy is None or getattr(self._local, "policy", None) is policy:
            return
        bind_thread(policy)
        self._local.policy = policy
        log.debug("thread %s bound by host policy '%s'", threading.current_thread().name, policy.name)
