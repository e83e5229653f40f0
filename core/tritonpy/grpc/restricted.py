"""Restricted API groups over gRPC: a server interceptor, added only when a group is restricted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

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

_STREAMING = {"ModelStreamInfer", "Watch"}


class RestrictedProtocol(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    """Calls to a restricted group without ``triton-grpc-protocol-<key>`` get Triton's UNAVAILABLE."""

    def __init__(self, groups: dict[str, Requirement]) -> None:
        # Metadata keys arrive in lower case; the message names the key as configured.
        self._needs = {
            rpc: Requirement(GRPC_HEADER_PREFIX + need.key, need.value)
            for rpc, group in RPC_GROUPS.items()
            if (need := groups.get(group)) is not None
        }

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        rpc = handler_call_details.method.rsplit("/", 1)[-1]
        header = self._needs.get(rpc)
        if header is not None:
            metadata = handler_call_details.invocation_metadata or ()
            pairs = ((str(k).lower(), v if isinstance(v, str) else "") for k, v in metadata)
            if not header.met_by(pairs):
                return _refusal(f"This protocol is restricted, expecting header '{header.key}'", rpc)
        return await continuation(handler_call_details)


def _refusal(message: str, rpc: str) -> grpc.RpcMethodHandler:
    if rpc in _STREAMING:

        async def refuse_stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAVAILABLE, message)
            yield  # an async generator, as a streaming handler must be

        return grpc.stream_stream_rpc_method_handler(refuse_stream)

    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)

    return grpc.unary_unary_rpc_method_handler(refuse)
