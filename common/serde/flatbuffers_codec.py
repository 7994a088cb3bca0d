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

from typing import Any, Generic, TypeVar, cast

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
    HashDataFilesResponseRoot,
    MigrateQueryResponseRoot,
    QueryResponseRoot,
    RawQueryResponseRoot,
    SplitTransformResponseRoot,
    TransformResponseRoot,
    ValidateQueryResponseRoot,
)

__all__ = [
    "HASH_DATA_FILES_REQUEST",
    "HASH_DATA_FILES_RESPONSE",
    "MIGRATE_QUERY_REQUEST",
    "MIGRATE_QUERY_RESPONSE",
    "QUERY_REQUEST",
    "QUERY_RESPONSE",
    "RAW_QUERY_REQUEST",
    "RAW_QUERY_RESPONSE",
    "SPLIT_TRANSFORM_REQUEST",
    "SPLIT_TRANSFORM_RESPONSE",
    "TRANSFORM_REQUEST",
    "TRANSFORM_RESPONSE",
    "VALIDATE_QUERY_REQUEST",
    "VALIDATE_QUERY_RESPONSE",
    "MessageCodec",
    "block_hash",
    "decode_block",
    "encode_block",
    "encode_block_reference",
    "read_manifest",
]

T = TypeVar("T")

ENGINE_TIMESTAMP_ALIGN = 1
"""Engine messages are not hashed; they use the ODF 0.35 (version 2) struct layout."""


# --- Engine messages ---------------------------------------------------------------------------


class MessageCodec(Generic[T]):
    """The codec of one engine message: a request table, or a response union, which travels
    wrapped in its root table (``XRoot { value: X }``, see ``fb_roots``)."""

    __slots__ = ("_root", "_wrapped")

    def __init__(self, root: type, *, wrapped: bool = False) -> None:
        self._root = root
        self._wrapped = wrapped

    def encode(self, message: T) -> bytes:
        return _encode_message(self._root(value=message) if self._wrapped else message, self._root)

    def decode(self, data: bytes) -> T:
        root: Any = _decode_message(data, self._root)
        return cast(T, root.value if self._wrapped else root)


TRANSFORM_REQUEST: MessageCodec[ep.TransformRequest] = MessageCodec(ep.TransformRequest)
TRANSFORM_RESPONSE: MessageCodec[ep.TransformResponse] = MessageCodec(
    TransformResponseRoot, wrapped=True
)
RAW_QUERY_REQUEST: MessageCodec[ep.RawQueryRequest] = MessageCodec(ep.RawQueryRequest)
RAW_QUERY_RESPONSE: MessageCodec[ep.RawQueryResponse] = MessageCodec(
    RawQueryResponseRoot, wrapped=True
)
VALIDATE_QUERY_REQUEST: MessageCodec[ep.ValidateQueryRequest] = MessageCodec(
    ep.ValidateQueryRequest
)
VALIDATE_QUERY_RESPONSE: MessageCodec[ep.ValidateQueryResponse] = MessageCodec(
    ValidateQueryResponseRoot, wrapped=True
)
MIGRATE_QUERY_REQUEST: MessageCodec[ep.MigrateQueryRequest] = MessageCodec(ep.MigrateQueryRequest)
MIGRATE_QUERY_RESPONSE: MessageCodec[ep.MigrateQueryResponse] = MessageCodec(
    MigrateQueryResponseRoot, wrapped=True
)
QUERY_REQUEST: MessageCodec[ep.QueryRequest] = MessageCodec(ep.QueryRequest)
QUERY_RESPONSE: MessageCodec[ep.QueryResponse] = MessageCodec(QueryResponseRoot, wrapped=True)
SPLIT_TRANSFORM_REQUEST: MessageCodec[ep.SplitTransformRequest] = MessageCodec(
    ep.SplitTransformRequest
)
SPLIT_TRANSFORM_RESPONSE: MessageCodec[ep.SplitTransformResponse] = MessageCodec(
    SplitTransformResponseRoot, wrapped=True
)
HASH_DATA_FILES_REQUEST: MessageCodec[ep.HashDataFilesRequest] = MessageCodec(
    ep.HashDataFilesRequest
)
HASH_DATA_FILES_RESPONSE: MessageCodec[ep.HashDataFilesResponse] = MessageCodec(
    HashDataFilesResponseRoot, wrapped=True
)

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
