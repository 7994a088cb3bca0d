"""Byte-exact FlatBuffers encoding of ODF metadata blocks and engine messages.

The layouts follow ``fbs/odf.fbs`` and ``fbs/engine_ext.fbs``; the builder call order is the
reference implementation's (kamu-cli at ODF 0.35), so ``encode_block`` reproduces its block
bytes and hashes exactly. The encoder and decoder are generic: each model class's field plan
is derived from its type hints once (``common.serde.fb_plan``) and compiled into a writer
(``fb_writer``). The writer drives ``fb_builder.FastBuilder``, which produces the same bytes
as the PyPI ``flatbuffers.Builder`` (>= 25.12.19, which shares vtables exactly like the Rust
builder); ``encode_block_reference`` encodes through the latter for differential tests.

A stored block is a ``Manifest { kind: 0x400000, version, content }`` whose ``content`` is the
finished ``MetadataBlock`` buffer. Version 2 (ODF 0.35) writes the ``Timestamp`` struct with
no alignment; version 3 writes it 4-aligned. Both are read.

Timestamps: Python datetimes have microseconds. Writing stores ``microsecond * 1000``
nanoseconds (UTC); reading truncates nanoseconds to microseconds. A block written elsewhere
with sub-microsecond precision therefore does not re-encode to the same bytes, which is why
the raw stored bytes are always what is hashed, verified and synced, never a re-encoding.

Every decoder raises ``DecodeError`` (or ``UnsupportedVersionError`` for a manifest version
other than 2 and 3) on malformed input, never a low-level exception.
"""

from __future__ import annotations

from typing import Any, TypeVar

from common.odf import engine_protocol as ep
from common.odf.errors import DecodeError, ValidationError
from common.serde import fb_reader
from common.serde.block_codec import (
    LOW_LEVEL_ERRORS,
    block_hash,
    decode_block,
    encode_block,
    encode_block_reference,
    fb_writer_module,
    read_manifest,
)
from common.serde.fb_roots import (
    MigrateQueryResponseRoot,
    QueryResponseRoot,
    RawQueryResponseRoot,
    TransformResponseRoot,
    ValidateQueryResponseRoot,
)

__all__ = [
    "block_hash",
    "decode_block",
    "decode_migrate_query_request",
    "decode_migrate_query_response",
    "decode_query_request",
    "decode_query_response",
    "decode_raw_query_request",
    "decode_raw_query_response",
    "decode_transform_request",
    "decode_transform_response",
    "decode_validate_query_request",
    "decode_validate_query_response",
    "encode_block",
    "encode_block_reference",
    "encode_migrate_query_request",
    "encode_migrate_query_response",
    "encode_query_request",
    "encode_query_response",
    "encode_raw_query_request",
    "encode_raw_query_response",
    "encode_transform_request",
    "encode_transform_response",
    "encode_validate_query_request",
    "encode_validate_query_response",
    "read_manifest",
]

T = TypeVar("T")

ENGINE_TIMESTAMP_ALIGN = 1
"""Engine messages are not hashed; they use the ODF 0.35 (version 2) struct layout."""


# --- Engine messages ---------------------------------------------------------------------------


def encode_transform_request(request: ep.TransformRequest) -> bytes:
    return _encode_message(request, ep.TransformRequest)


def decode_transform_request(data: bytes) -> ep.TransformRequest:
    return _decode_message(data, ep.TransformRequest)


def encode_transform_response(response: ep.TransformResponse) -> bytes:
    return _encode_message(TransformResponseRoot(value=response), TransformResponseRoot)


def decode_transform_response(data: bytes) -> ep.TransformResponse:
    value: ep.TransformResponse = _decode_message(data, TransformResponseRoot).value
    return value


def encode_raw_query_request(request: ep.RawQueryRequest) -> bytes:
    return _encode_message(request, ep.RawQueryRequest)


def decode_raw_query_request(data: bytes) -> ep.RawQueryRequest:
    return _decode_message(data, ep.RawQueryRequest)


def encode_raw_query_response(response: ep.RawQueryResponse) -> bytes:
    return _encode_message(RawQueryResponseRoot(value=response), RawQueryResponseRoot)


def decode_raw_query_response(data: bytes) -> ep.RawQueryResponse:
    value: ep.RawQueryResponse = _decode_message(data, RawQueryResponseRoot).value
    return value


def encode_validate_query_request(request: ep.ValidateQueryRequest) -> bytes:
    return _encode_message(request, ep.ValidateQueryRequest)


def decode_validate_query_request(data: bytes) -> ep.ValidateQueryRequest:
    return _decode_message(data, ep.ValidateQueryRequest)


def encode_validate_query_response(response: ep.ValidateQueryResponse) -> bytes:
    return _encode_message(ValidateQueryResponseRoot(value=response), ValidateQueryResponseRoot)


def decode_validate_query_response(data: bytes) -> ep.ValidateQueryResponse:
    value: ep.ValidateQueryResponse = _decode_message(data, ValidateQueryResponseRoot).value
    return value


def encode_migrate_query_request(request: ep.MigrateQueryRequest) -> bytes:
    return _encode_message(request, ep.MigrateQueryRequest)


def decode_migrate_query_request(data: bytes) -> ep.MigrateQueryRequest:
    return _decode_message(data, ep.MigrateQueryRequest)


def encode_migrate_query_response(response: ep.MigrateQueryResponse) -> bytes:
    return _encode_message(MigrateQueryResponseRoot(value=response), MigrateQueryResponseRoot)


def decode_migrate_query_response(data: bytes) -> ep.MigrateQueryResponse:
    value: ep.MigrateQueryResponse = _decode_message(data, MigrateQueryResponseRoot).value
    return value


def encode_query_request(request: ep.QueryRequest) -> bytes:
    return _encode_message(request, ep.QueryRequest)


def decode_query_request(data: bytes) -> ep.QueryRequest:
    return _decode_message(data, ep.QueryRequest)


def encode_query_response(response: ep.QueryResponse) -> bytes:
    return _encode_message(QueryResponseRoot(value=response), QueryResponseRoot)


def decode_query_response(data: bytes) -> ep.QueryResponse:
    value: ep.QueryResponse = _decode_message(data, QueryResponseRoot).value
    return value


# --- Internals ---------------------------------------------------------------------------------


def _encode_root(obj: Any, ts_align: int, size_hint: int = 1024) -> bytes:
    writer = fb_writer_module()
    builder = writer.new_builder(size_hint)
    encoded: bytes = writer.finish(builder, writer.write_table(builder, obj, ts_align))
    return encoded


def _encode_message(message: Any, cls: type) -> bytes:
    if type(message) is not cls:
        raise ValidationError(f"expected a {cls.__name__}, got {type(message).__name__}")
    try:
        return _encode_root(message, ENGINE_TIMESTAMP_ALIGN)
    except ValidationError as e:
        raise e.at(_message_name(cls)) from None


def _decode_message(data: bytes, cls: type[T]) -> T:
    name = _message_name(cls)
    try:
        message = fb_reader.read_root(bytes(data), cls)
    except DecodeError as e:
        raise e.at(name) from None
    except LOW_LEVEL_ERRORS as e:
        raise DecodeError(f"malformed {name}: {e}") from None
    assert isinstance(message, cls)
    return message


def _message_name(cls: type) -> str:
    return cls.__name__
