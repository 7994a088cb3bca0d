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

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from common.odf import engine_protocol as ep
from common.odf.block import (
    BLOCK_VERSION_WRITE,
    BLOCK_VERSIONS_READ,
    ODF_METADATA_BLOCK_MULTICODEC,
    MetadataBlock,
)
from common.odf.errors import DecodeError, UnsupportedVersionError, ValidationError
from common.odf.multihash import Multihash
from common.serde import fb_reader
from common.serde.fb_roots import (
    MigrateQueryResponseRoot,
    QueryResponseRoot,
    RawQueryResponseRoot,
    TransformResponseRoot,
    ValidateQueryResponseRoot,
)

if TYPE_CHECKING:
    from types import ModuleType

    from common.serde import fb_writer


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

_TIMESTAMP_ALIGN = {2: 1, 3: 4}
"""Manifest version -> alignment of the Timestamp struct."""

ENGINE_TIMESTAMP_ALIGN = 1
"""Engine messages are not hashed; they use the ODF 0.35 (version 2) struct layout."""

_LOW_LEVEL_ERRORS = (struct.error, IndexError, ValueError, OverflowError, TypeError)


# --- Metadata blocks ---------------------------------------------------------------------------


def _fb_writer() -> ModuleType:
    """The encoder, imported on first use: it pulls in the flatbuffers package, which imports
    numpy, and most commands only decode."""
    from common.serde import fb_writer

    return fb_writer


def encode_block(block: MetadataBlock, *, version: int = BLOCK_VERSION_WRITE) -> bytes:
    """The manifest bytes of ``block``: what is stored and hashed."""
    return _encode_block(block, version, _fb_writer().new_builder)


def encode_block_reference(block: MetadataBlock, *, version: int = BLOCK_VERSION_WRITE) -> bytes:
    """``encode_block`` through the PyPI ``flatbuffers.Builder``: the same bytes, slower.

    The reference for differential tests and benchmarks of the fast builder.
    """
    return _encode_block(block, version, _fb_writer().new_reference_builder)


def _encode_block(
    block: MetadataBlock, version: int, new_builder: Callable[[int], fb_writer.Builder]
) -> bytes:
    align = _TIMESTAMP_ALIGN.get(version)
    if align is None:
        raise UnsupportedVersionError(
            f"cannot write metadata block version {version} (supported: 2, 3)"
        )
    if type(block) is not MetadataBlock:
        raise ValidationError(f"expected a MetadataBlock, got {type(block).__name__}")
    try:
        builder = new_builder(2048)
        writer = _fb_writer()
        inner = writer.finish(builder, writer.write_table(builder, block, align))
    except ValidationError as e:
        raise e.at("MetadataBlock") from None
    builder = new_builder(len(inner) + 256)
    content = builder.CreateByteVector(inner)
    builder.StartObject(3)
    builder.PrependInt64Slot(0, ODF_METADATA_BLOCK_MULTICODEC, 0)
    builder.PrependInt32Slot(1, version, 0)
    builder.PrependUOffsetTRelativeSlot(2, content, 0)
    manifest: bytes = _fb_writer().finish(builder, builder.EndObject())
    return manifest


def decode_block(data: bytes) -> MetadataBlock:
    """Decode manifest bytes (version 2 or 3) into a MetadataBlock."""
    _, content = read_manifest(data)
    try:
        block = fb_reader.read_root(content, MetadataBlock)
    except DecodeError as e:
        raise e.at("MetadataBlock") from None
    except _LOW_LEVEL_ERRORS as e:
        raise DecodeError(f"malformed MetadataBlock: {e}") from None
    assert isinstance(block, MetadataBlock)
    return block


def block_hash(manifest: bytes) -> Multihash:
    """The block's identity: SHA3-256 multihash of the stored manifest bytes."""
    return Multihash.sha3_256(bytes(manifest))


def read_manifest(data: bytes) -> tuple[int, bytes]:
    """The ``(version, content)`` of a block manifest, checking its kind and version."""
    try:
        return _read_manifest(bytes(data))
    except _LOW_LEVEL_ERRORS as e:
        raise DecodeError(f"malformed metadata block manifest: {e}") from None


def _read_manifest(buf: bytes) -> tuple[int, bytes]:
    if len(buf) < 12:
        raise DecodeError(f"manifest is {len(buf)} bytes, too short to be a FlatBuffer")
    table = fb_reader.Table(buf, struct.unpack_from("<I", buf, 0)[0], "Manifest")
    at = table.field(4, 8)
    kind = struct.unpack_from("<q", buf, at)[0] if at else 0
    if kind != ODF_METADATA_BLOCK_MULTICODEC:
        raise DecodeError(
            f"manifest kind is 0x{kind:x}, expected odf-metadata-block "
            f"(0x{ODF_METADATA_BLOCK_MULTICODEC:x})"
        )
    at = table.field(6, 4)
    version = struct.unpack_from("<i", buf, at)[0] if at else 0
    if version not in BLOCK_VERSIONS_READ:
        raise UnsupportedVersionError(
            f"metadata block version {version} is not supported (supported: "
            f"{', '.join(map(str, BLOCK_VERSIONS_READ))})"
        )
    target = table.deref(8)
    if target == 0:
        raise DecodeError("manifest has no content")
    return version, fb_reader.read_bytes(buf, target)


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
    writer = _fb_writer()
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
    except _LOW_LEVEL_ERRORS as e:
        raise DecodeError(f"malformed {name}: {e}") from None
    assert isinstance(message, cls)
    return message


def _message_name(cls: type) -> str:
    return cls.__name__
