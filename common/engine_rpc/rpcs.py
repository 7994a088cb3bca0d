"""The engine's RPCs, declared once: the server and the client are both built from this table.

Every RPC of ``engine.Engine`` (``proto/engine.proto``) is server-streaming and carries one
FlatBuffers buffer per message. An ``EngineRpc`` says, for one RPC, how its request and its
responses are encoded and which response messages end the stream: Success, InvalidQuery (the
query's fault) or InternalError; ``progress`` messages (the spec's transform and raw query
only) may come before. A unit test checks the table against the service in the proto.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from common.engine_rpc.grpc_generated import engine_pb2
from common.odf import engine_protocol as ep
from common.serde import flatbuffers_codec as codec

SERVICE = "engine.Engine"

Req = TypeVar("Req")
Ok = TypeVar("Ok")


@dataclass(frozen=True, slots=True)
class EngineRpc(Generic[Req, Ok]):
    """One RPC: its name, envelopes, FlatBuffers codecs and the classes of its responses."""

    name: str
    """The gRPC method name, as in the proto."""
    request_envelope: type[Any]
    response_envelope: type[Any]
    encode_request: Callable[[Req], bytes]
    decode_request: Callable[[bytes], Req]
    encode_response: Callable[[Any], bytes]
    decode_response: Callable[[bytes], Any]
    success: type[Ok]
    invalid_query: type[Any]
    internal_error: type[Any]
    progress: type[Any] | None = None

    @property
    def path(self) -> str:
        """The gRPC method path: ``/engine.Engine/<name>``."""
        return f"/{SERVICE}/{self.name}"

    @property
    def request_name(self) -> str:
        """The FlatBuffers request table's name (for messages)."""
        return self.request_envelope.__name__


TRANSFORM: EngineRpc[ep.TransformRequest, ep.TransformResponseSuccess] = EngineRpc(
    "ExecuteTransform",
    engine_pb2.TransformRequest,
    engine_pb2.TransformResponse,
    codec.TRANSFORM_REQUEST.encode,
    codec.TRANSFORM_REQUEST.decode,
    codec.TRANSFORM_RESPONSE.encode,
    codec.TRANSFORM_RESPONSE.decode,
    ep.TransformResponseSuccess,
    ep.TransformResponseInvalidQuery,
    ep.TransformResponseInternalError,
    ep.TransformResponseProgress,
)
RAW_QUERY: EngineRpc[ep.RawQueryRequest, ep.RawQueryResponseSuccess] = EngineRpc(
    "ExecuteRawQuery",
    engine_pb2.RawQueryRequest,
    engine_pb2.RawQueryResponse,
    codec.RAW_QUERY_REQUEST.encode,
    codec.RAW_QUERY_REQUEST.decode,
    codec.RAW_QUERY_RESPONSE.encode,
    codec.RAW_QUERY_RESPONSE.decode,
    ep.RawQueryResponseSuccess,
    ep.RawQueryResponseInvalidQuery,
    ep.RawQueryResponseInternalError,
    ep.RawQueryResponseProgress,
)
VALIDATE: EngineRpc[ep.ValidateQueryRequest, ep.ValidateQueryResponseSuccess] = EngineRpc(
    "ValidateQuery",
    engine_pb2.ValidateQueryRequest,
    engine_pb2.ValidateQueryResponse,
    codec.VALIDATE_QUERY_REQUEST.encode,
    codec.VALIDATE_QUERY_REQUEST.decode,
    codec.VALIDATE_QUERY_RESPONSE.encode,
    codec.VALIDATE_QUERY_RESPONSE.decode,
    ep.ValidateQueryResponseSuccess,
    ep.ValidateQueryResponseInvalidQuery,
    ep.ValidateQueryResponseInternalError,
)
MIGRATE: EngineRpc[ep.MigrateQueryRequest, ep.MigrateQueryResponseSuccess] = EngineRpc(
    "MigrateQuery",
    engine_pb2.MigrateQueryRequest,
    engine_pb2.MigrateQueryResponse,
    codec.MIGRATE_QUERY_REQUEST.encode,
    codec.MIGRATE_QUERY_REQUEST.decode,
    codec.MIGRATE_QUERY_RESPONSE.encode,
    codec.MIGRATE_QUERY_RESPONSE.decode,
    ep.MigrateQueryResponseSuccess,
    ep.MigrateQueryResponseInvalidQuery,
    ep.MigrateQueryResponseInternalError,
)
QUERY: EngineRpc[ep.QueryRequest, ep.QueryResponseSuccess] = EngineRpc(
    "ExecuteQuery",
    engine_pb2.QueryRequest,
    engine_pb2.QueryResponse,
    codec.QUERY_REQUEST.encode,
    codec.QUERY_REQUEST.decode,
    codec.QUERY_RESPONSE.encode,
    codec.QUERY_RESPONSE.decode,
    ep.QueryResponseSuccess,
    ep.QueryResponseInvalidQuery,
    ep.QueryResponseInternalError,
)
SPLIT_TRANSFORM: EngineRpc[ep.SplitTransformRequest, ep.SplitTransformResponseSuccess] = EngineRpc(
    "ExecuteSplitTransform",
    engine_pb2.SplitTransformRequest,
    engine_pb2.SplitTransformResponse,
    codec.SPLIT_TRANSFORM_REQUEST.encode,
    codec.SPLIT_TRANSFORM_REQUEST.decode,
    codec.SPLIT_TRANSFORM_RESPONSE.encode,
    codec.SPLIT_TRANSFORM_RESPONSE.decode,
    ep.SplitTransformResponseSuccess,
    ep.SplitTransformResponseInvalidQuery,
    ep.SplitTransformResponseInternalError,
    ep.SplitTransformResponseProgress,
)
HASH_DATA_FILES: EngineRpc[ep.HashDataFilesRequest, ep.HashDataFilesResponseSuccess] = EngineRpc(
    "HashDataFiles",
    engine_pb2.HashDataFilesRequest,
    engine_pb2.HashDataFilesResponse,
    codec.HASH_DATA_FILES_REQUEST.encode,
    codec.HASH_DATA_FILES_REQUEST.decode,
    codec.HASH_DATA_FILES_RESPONSE.encode,
    codec.HASH_DATA_FILES_RESPONSE.decode,
    ep.HashDataFilesResponseSuccess,
    ep.HashDataFilesResponseInvalidQuery,
    ep.HashDataFilesResponseInternalError,
)

RPCS: tuple[EngineRpc[Any, Any], ...] = (
    TRANSFORM,
    RAW_QUERY,
    VALIDATE,
    MIGRATE,
    QUERY,
    SPLIT_TRANSFORM,
    HASH_DATA_FILES,
)
"""Every RPC of the service."""
