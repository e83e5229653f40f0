"""Restricted API groups over gRPC (--grpc-restricted-protocol), as Triton 2.51 answers them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException
from tritonpy.grpc import grpc_service_pb2 as pb
from tritonpy.grpc.restricted import RPC_GROUPS
from tritonpy_testservers import GrpcServer, start_grpc

MESSAGE = "This protocol is restricted, expecting header 'triton-grpc-protocol-{}'"


@pytest.fixture(scope="module", params=["tritonpy", "grpcio"])
def restricted(test_repos: list[Path], request: pytest.FixtureRequest) -> Iterator[GrpcServer]:
    server, frontend = start_grpc(
        test_repos,
        grpc_implementation=request.param,
        grpc_restricted_protocol=["model-repository,logging:admin-key=secret", "inference:ik=1"],
    )
    yield frontend
    frontend.stop()
    server.stop()


def _refused(info: pytest.ExceptionInfo[InferenceServerException], key: str) -> None:
    assert info.value.status() == "StatusCode.UNAVAILABLE"
    assert MESSAGE.format(key) in str(info.value)


def test_restricted_groups_need_their_metadata(restricted: GrpcServer) -> None:
    client = grpcclient.InferenceServerClient(restricted.url)
    with pytest.raises(InferenceServerException) as info:
        client.get_model_repository_index()
    _refused(info, "admin-key")
    with pytest.raises(InferenceServerException) as info:  # the bare key is not enough
        client.get_log_settings(headers={"admin-key": "secret"})
    _refused(info, "admin-key")
    with pytest.raises(InferenceServerException) as info:
        client.get_log_settings(headers={"triton-grpc-protocol-admin-key": "wrong"})
    _refused(info, "admin-key")
    assert client.get_log_settings(headers={"triton-grpc-protocol-admin-key": "secret"}) is not None
    assert client.is_server_live() and client.get_model_config("addsub") is not None  # open groups


def test_inference_unary_and_streaming(restricted: GrpcServer) -> None:
    client = grpcclient.InferenceServerClient(restricted.url)
    a = np.ones((1, 4), np.int32)
    inputs = [grpcclient.InferInput(n, [1, 4], "INT32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(a)
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub", inputs)
    _refused(info, "ik")
    result = client.infer("addsub", inputs, headers={"triton-grpc-protocol-ik": "1"})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 2)
    with grpc.insecure_channel(restricted.url) as channel:
        stream = channel.stream_stream(
            "/inference.GRPCInferenceService/ModelStreamInfer",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelStreamInferResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as rpc:
            list(stream(iter([pb.ModelInferRequest(model_name="addsub")])))
        assert rpc.value.code() == grpc.StatusCode.UNAVAILABLE
        assert rpc.value.details() == MESSAGE.format("ik")


def test_every_rpc_has_a_group() -> None:
    rpcs = set(pb.DESCRIPTOR.services_by_name["GRPCInferenceService"].methods_by_name)
    assert rpcs <= set(RPC_GROUPS)
