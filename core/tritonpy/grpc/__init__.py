"""gRPC front end: ``inference.GRPCInferenceService`` and ``grpc.health.v1``, on
tritonpy's own HTTP/2 transport (``native.py``) or on grpc.aio."""

from .frontend import create_grpc_server

__all__ = ["create_grpc_server"]
