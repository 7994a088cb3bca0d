"""Byte-exact FlatBuffers encoding of ODF metadata blocks: the manifests stored and hashed.

Split from ``common.serde.flatbuffers_codec`` (which re-exports it, with the engine messages)
so that reading a metadata chain (``odf log``) does not import the engine protocol's model.
A stored block is a ``Manifest { kind: 0x400000, version, content }`` whose ``content`` is the
finished ``MetadataBlock`` buffer; see ``flatbuffers_codec`` for the layouts and timestamps.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from common.odf.block import (
    BLOCK_VERSION_WRITE,
    BLOCK_VERSIONS_READ,
    ODF_METADATA_BLOCK_MULTICODEC,
    MetadataBlock,
)
from common.odf.errors import DecodeError, UnsupportedVersionError, ValidationError
from common.odf.multihash import Multihash
from common.serde import fb_reader

if TYPE_CHECKING:
    from types import ModuleType

    from common.serde import fb_writer

__all__ = ["block_hash", "decode_block", "encode_block", "encode_block_reference", "read_manifest"]

_TIMESTAMP_ALIGN = {2: 1, 3: 4}
"""Manifest version -> alignment of the Timestamp struct."""

LOW_LEVEL_ERRORS = (struct.error, IndexError, ValueError, OverflowError, TypeError)
"""What a malformed buffer raises from ``struct`` and slicing; decoders turn it into a
``DecodeError``."""


# --- Metadata blocks ---------------------------------------------------------------------------


def fb_writer_module() -> ModuleType:
    """The encoder, imported on first use: it pulls in the flatbuffers package, which imports
    numpy, and most commands only decode."""
    from common.serde import fb_writer

    return fb_writer


def encode_block(block: MetadataBlock, *, version: int = BLOCK_VERSION_WRITE) -> bytes:
    """The manifest bytes of ``block``: what is stored and hashed."""
    return _encode_block(block, version, fb_writer_module().new_builder)


def encode_block_reference(block: MetadataBlock, *, version: int = BLOCK_VERSION_WRITE) -> bytes:
    """``encode_block`` through the PyPI ``flatbuffers.Builder``: the same bytes, slower.

    The reference for differential tests and benchmarks of the fast builder.
    """
    return _encode_block(block, version, fb_writer_module().new_reference_builder)


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
        writer = fb_writer_module()
        inner = writer.finish(builder, writer.write_table(builder, block, align))
    except ValidationError as e:
        raise e.at("MetadataBlock") from None
    builder = new_builder(len(inner) + 256)
    content = builder.CreateByteVector(inner)
    builder.StartObject(3)
    builder.PrependInt64Slot(0, ODF_METADATA_BLOCK_MULTICODEC, 0)
    builder.PrependInt32Slot(1, version, 0)
    builder.PrependUOffsetTRelativeSlot(2, content, 0)
    manifest: bytes = fb_writer_module().finish(builder, builder.EndObject())
    return manifest


def decode_block(data: bytes) -> MetadataBlock:
    """Decode manifest bytes (version 2 or 3) into a MetadataBlock."""
    _, content = read_manifest(data)
    try:
        block = fb_reader.read_root(content, MetadataBlock)
    except DecodeError as e:
        raise e.at("MetadataBlock") from None
    except LOW_LEVEL_ERRORS as e:
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
    except LOW_LEVEL_ERRORS as e:
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
