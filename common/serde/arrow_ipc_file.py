"""An Arrow IPC file with a schema and no records, built around a stored Schema flatbuffer.

The Parquet exchange hands the engine each input's schema as an empty Arrow IPC file (its
Parquet files may lack the columns a later schema added). The schema is at hand as the bare
``Schema`` flatbuffer of the input's ``SetDataSchema``; this wraps those bytes as they are in
the IPC file's two flatbuffers (the schema ``Message`` and the ``Footer``), so a transaction
writes the file without importing pyarrow (and numpy) before its engine call.

A flatbuffer table refers to what it holds by offsets relative to itself, so the stored
buffer keeps its meaning wherever it is copied, as long as its alignment is kept: builders
align from the end of a buffer, so the copy's end is aligned to 8 bytes, and the new buffer's
table points forward to the copy's root table. Layout (``format/File.fbs``,
``format/Message.fbs``; little-endian)::

    "ARROW1" 00 00
    FFFFFFFF <int32 length> <Message {version V5, header Schema}, padded to 8>   (no body)
    FFFFFFFF 00000000                                                             (end of stream)
    <Footer {version V5, schema, dictionaries [], recordBatches []}> <int32 length> "ARROW1"

Only the structure of the stored bytes is checked here (``schema_root``: offsets and tables
in bounds, a fields vector); a schema with custom metadata is refused (``ValueError``), since
the exchange's schema file carries none: the caller writes that one with pyarrow.
"""

from __future__ import annotations

import struct

from common.serde.arrow_schema_tables import schema_root
from common.serde.fb_builder import FastBuilder

MAGIC = b"ARROW1"
CONTINUATION = b"\xff\xff\xff\xff"
METADATA_V5 = 4
HEADER_SCHEMA = 1
_CUSTOM_METADATA_SLOT = 2
_BLOCK_BYTES = 24  # struct Block { offset: long; metaDataLength: int; bodyLength: long; }


def empty_ipc_file(schema: bytes) -> bytes:
    """The bytes of an Arrow IPC file holding ``schema`` (a bare Schema flatbuffer) and no
    record batches. Raises DecodeError for malformed schema bytes, ValueError for a schema
    with custom metadata."""
    _, root, _ = schema_root(schema)
    if root.tables(_CUSTOM_METADATA_SLOT, "custom_metadata"):
        raise ValueError("the schema has custom metadata")
    message = _message(schema)
    footer = _footer(schema)
    return b"".join(
        (
            MAGIC,
            b"\0\0",
            CONTINUATION,
            struct.pack("<i", len(message)),
            message,
            CONTINUATION,
            b"\0\0\0\0",
            footer,
            struct.pack("<i", len(footer)),
            MAGIC,
        )
    )


def _embed(builder: FastBuilder, schema: bytes) -> int:
    """Copy ``schema`` into ``builder`` (its end aligned to 8 bytes); its root table."""
    builder.Prep(8, 0)
    builder.Prep(1, len(schema))  # room for the copy, no padding
    builder.head = builder.head - len(schema)
    builder.Bytes[builder.head : builder.head + len(schema)] = schema
    start = builder.Offset()
    (root,) = struct.unpack_from("<I", schema, 0)
    return int(start - root)


def _message(schema: bytes) -> bytes:
    builder = FastBuilder(len(schema) + 64)
    table = _embed(builder, schema)
    builder.StartObject(5)
    builder.PrependUOffsetTRelativeSlot(2, table, 0)
    builder.PrependInt16Slot(0, METADATA_V5, 0)
    builder.PrependUint8Slot(1, HEADER_SCHEMA, 0)
    builder.Finish(builder.EndObject())
    data = bytes(builder.Output())
    return data + b"\0" * (-len(data) % 8)


def _footer(schema: bytes) -> bytes:
    builder = FastBuilder(len(schema) + 96)
    table = _embed(builder, schema)
    vectors = []
    for _ in range(2):  # dictionaries, recordBatches: none
        builder.StartVector(_BLOCK_BYTES, 0, 8)
        vectors.append(builder.EndVector())
    builder.StartObject(5)
    builder.PrependUOffsetTRelativeSlot(3, vectors[1], 0)
    builder.PrependUOffsetTRelativeSlot(2, vectors[0], 0)
    builder.PrependUOffsetTRelativeSlot(1, table, 0)
    builder.PrependInt16Slot(0, METADATA_V5, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())
