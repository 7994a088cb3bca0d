"""``SetDataSchema.schema``: a bare Arrow IPC ``Schema`` flatbuffer, byte-for-byte as arrow-rs 52.

The root table is ``Schema`` itself (format/Schema.fbs), with no IPC ``Message`` around it, no
0xFFFFFFFF continuation marker, no length prefix and no padding. pyarrow cannot produce these
bytes (its C++ builder lays tables out differently and wraps them in a message), so the encoder
below replays the builder call sequence of arrow-ipc 52.0.0 ``convert.rs`` with the PyPI
``flatbuffers`` Builder (>= 25.12.19, whose vtable dedup matches flatbuffers-rs 24.3.25).

Ported call order (arrow-ipc 52.0.0, ``schema_to_fb_offset`` / ``build_field`` /
``get_fb_field_type`` / ``get_fb_dictionary`` / ``metadata_to_fb``):

- Schema: build every Field in order, then the ``fields`` offsets vector, then custom metadata
  (if any). Table: ``fields`` (slot 1), then ``custom_metadata`` (slot 2). ``endianness`` Little
  (the default) and ``features`` are never written.
- Field: custom metadata (if any), the name string, the type (``get_fb_field_type``), then the
  DictionaryEncoding (dictionary fields only). Table, in this add order: ``name`` (slot 0),
  ``dictionary`` (4), ``type_type`` (2, u8), ``nullable`` (1, bool, omitted when false),
  ``children`` (5), ``type`` (3), ``custom_metadata`` (6).
- Custom metadata: for each entry, key string, value string, KeyValue table (key, value); then
  the offsets vector. arrow-rs iterates a HashMap (random order); we sort by key.
- Types, in creation order (defaults are omitted by ``push_slot``):

  - Int/UInt: empty children vector, then Int table: ``is_signed`` (omitted when false), then
    ``bitWidth``.
  - Float16/32/64: empty children, then FloatingPoint: ``precision`` (HALF omitted).
  - Null, Bool, Binary, LargeBinary, Utf8, LargeUtf8, BinaryView, Utf8View: empty type table,
    then empty children.
  - FixedSizeBinary: table with ``byteWidth``, then empty children.
  - Date32/Date64: Date table ``unit`` (DAY written, MILLISECOND omitted), then children.
  - Time32/64: Time table, ``bitWidth`` (32 omitted) then ``unit`` (MILLISECOND omitted), then
    children.
  - Timestamp: the timezone string is ALWAYS created first, even when empty (a naive timestamp
    leaves an orphan 8-byte empty string), then the Timestamp table: ``unit`` (SECOND omitted),
    ``timezone`` only when non-empty; then children.
  - Interval / Duration: table with ``unit`` (defaults YEAR_MONTH / MILLISECOND omitted), then
    children.
  - List/LargeList: the child Field recursively, then the empty type table, then a one-element
    children vector. FixedSizeList: child, table with ``listSize``, children. Map: child,
    table with ``keysSorted`` (false omitted), children. Struct: all child Fields, the empty
    Struct_ table, children. RunEndEncoded: run_ends Field, values Field, empty table, children.
  - Union: child Fields, the ``typeIds`` [int] vector, table (``mode``: Sparse omitted,
    ``typeIds``), children.
  - Decimal128/256: Decimal table ``precision``, ``scale`` (0 omitted), ``bitWidth`` (128
    omitted), then children.
  - Dictionary: the value type as above; the DictionaryEncoding is built after it: Int table
    (``is_signed`` then ``bitWidth``), then DictionaryEncoding ``id`` (0 omitted; pyarrow has no
    dictionary ids so we write 0), ``indexType``, ``isOrdered`` (false omitted).
"""

from __future__ import annotations

import pyarrow as pa

from common.serde.arrow_schema_reader import read_schema
from common.serde.arrow_schema_writer import write_schema

__all__ = ["decode_arrow_schema", "encode_arrow_schema"]


def encode_arrow_schema(schema: pa.Schema) -> bytes:
    """The bytes arrow-rs 52 ``schema_to_fb`` writes for ``schema`` (metadata keys sorted).

    Raises ValidationError for types arrow-rs 52 cannot write (list views, decimal32/64,
    extension types).
    """
    return write_schema(schema)


def decode_arrow_schema(data: bytes) -> pa.Schema:
    """Read a bare Arrow ``Schema`` flatbuffer written by any Arrow implementation.

    Raises DecodeError (with the field path) for truncated, garbage or unsupported input.
    """
    return read_schema(bytes(data))
