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
    pb = engine_pb2.TransformRequest(flatbuffer=codec.TRANSFORM_REQUEST.encode(request))
    return _single(stub.ExecuteTransform(pb, timeout=300), codec.TRANSFORM_RESPONSE.decode)


def raw_query(stub: engine_pb2_grpc.EngineStub, request: ep.RawQueryRequest) -> ep.RawQueryResponse:
    pb = engine_pb2.RawQueryRequest(flatbuffer=codec.RAW_QUERY_REQUEST.encode(request))
    return _single(stub.ExecuteRawQuery(pb, timeout=300), codec.RAW_QUERY_RESPONSE.decode)


def validate(
    stub: engine_pb2_grpc.EngineStub, request: ep.ValidateQueryRequest
) -> ep.ValidateQueryResponse:
    pb = engine_pb2.ValidateQueryRequest(flatbuffer=codec.VALIDATE_QUERY_REQUEST.encode(request))
    return _single(stub.ValidateQuery(pb, timeout=300), codec.VALIDATE_QUERY_RESPONSE.decode)


def migrate(
    stub: engine_pb2_grpc.EngineStub, request: ep.MigrateQueryRequest
) -> ep.MigrateQueryResponse:
    pb = engine_pb2.MigrateQueryRequest(flatbuffer=codec.MIGRATE_QUERY_REQUEST.encode(request))
    return _single(stub.MigrateQuery(pb, timeout=300), codec.MIGRATE_QUERY_RESPONSE.decode)


def split_transform(
    stub: engine_pb2_grpc.EngineStub, request: ep.SplitTransformRequest
) -> ep.SplitTransformResponse:
    pb = engine_pb2.SplitTransformRequest(flatbuffer=codec.SPLIT_TRANSFORM_REQUEST.encode(request))
    return _single(
        stub.ExecuteSplitTransform(pb, timeout=300), codec.SPLIT_TRANSFORM_RESPONSE.decode
    )


def hash_data_files(
    stub: engine_pb2_grpc.EngineStub, request: ep.HashDataFilesRequest
) -> ep.HashDataFilesResponse:
    pb = engine_pb2.HashDataFilesRequest(flatbuffer=codec.HASH_DATA_FILES_REQUEST.encode(request))
    return _single(stub.HashDataFiles(pb, timeout=300), codec.HASH_DATA_FILES_RESPONSE.decode)
