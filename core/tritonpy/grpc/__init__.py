"""gRPC front end: ``inference.GRPCInferenceService`` and ``grpc.health.v1`` on grpc.aio."""

from .frontend import create_grpc_server

__all__ = ["create_grpc_server"]
