"""A gRPC client for engine tests: encode the request, read the whole stream, decode."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from common.engine_rpc import engine_pb2, engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.serde import flatbuffers_codec as codec

R = TypeVar("R")


def _single(stream: Iterable[Any], decode: Callable[[bytes], R]) -> R:
    messages = list(stream)
    assert len(messages) == 1, f"expected exactly one terminal message, got {len(messages)}"
    return decode(messages[0].flatbuffer)


def transform(
    stub: engine_pb2_grpc.EngineStub, request: ep.TransformRequest
) -> ep.TransformResponse:
    pb = engine_pb2.TransformRequest(flatbuffer=codec.encode_transform_request(request))
    return _single(stub.ExecuteTransform(pb, timeout=300), codec.decode_transform_response)


def raw_query(stub: engine_pb2_grpc.EngineStub, request: ep.RawQueryRequest) -> ep.RawQueryResponse:
    pb = engine_pb2.RawQueryRequest(flatbuffer=codec.encode_raw_query_request(request))
    return _single(stub.ExecuteRawQuery(pb, timeout=300), codec.decode_raw_query_response)


def validate(
    stub: engine_pb2_grpc.EngineStub, request: ep.ValidateQueryRequest
) -> ep.ValidateQueryResponse:
    pb = engine_pb2.ValidateQueryRequest(flatbuffer=codec.encode_validate_query_request(request))
    return _single(stub.ValidateQuery(pb, timeout=300), codec.decode_validate_query_response)


def migrate(
    stub: engine_pb2_grpc.EngineStub, request: ep.MigrateQueryRequest
) -> ep.MigrateQueryResponse:
    pb = engine_pb2.MigrateQueryRequest(flatbuffer=codec.encode_migrate_query_request(request))
    return _single(stub.MigrateQuery(pb, timeout=300), codec.decode_migrate_query_response)
