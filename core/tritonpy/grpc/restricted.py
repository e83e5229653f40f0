"""Restricted API groups over gRPC: the group of each RPC, and the metadata each RPC
of a restricted group needs (``rpc_requirements``). The native transport checks
them when it dispatches a call (``native.py``); grpc.aio with an interceptor
(``aio.RestrictedProtocol``), added only when a group is restricted."""

from __future__ import annotations

from collections.abc import Mapping

from ..restricted import GRPC_HEADER_PREFIX, Requirement

#: The group of each RPC, as Triton groups them.
RPC_GROUPS = {
    "ServerLive": "health",
    "ServerReady": "health",
    "ModelReady": "health",
    "Check": "health",  # grpc.health.v1.Health
    "Watch": "health",
    "ServerMetadata": "metadata",
    "ModelMetadata": "metadata",
    "ModelInfer": "inference",
    "ModelStreamInfer": "inference",
    "ModelConfig": "model-config",
    "ModelStatistics": "statistics",
    "RepositoryIndex": "model-repository",
    "RepositoryModelLoad": "model-repository",
    "RepositoryModelUnload": "model-repository",
    "SystemSharedMemoryStatus": "shared-memory",
    "SystemSharedMemoryRegister": "shared-memory",
    "SystemSharedMemoryUnregister": "shared-memory",
    "CudaSharedMemoryStatus": "shared-memory",
    "CudaSharedMemoryRegister": "shared-memory",
    "CudaSharedMemoryUnregister": "shared-memory",
    "TraceSetting": "trace",
    "LogSettings": "logging",
}


def rpc_requirements(groups: Mapping[str, Requirement]) -> dict[str, Requirement]:
    """RPC name -> the metadata a call of it must carry (``triton-grpc-protocol-<key>``),
    for the RPCs of the restricted ``groups``."""
    return {
        rpc: Requirement(GRPC_HEADER_PREFIX + need.key, need.value)
        for rpc, group in RPC_GROUPS.items()
        if (need := groups.get(group)) is not None
    }
