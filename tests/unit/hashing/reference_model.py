"""A literal, row-by-row model of arrow-digest 52 (``RecordDigestV0<Sha3_256>``) for tests.

It follows the Rust code statement by statement (one ``update`` per value, validity read bit
by bit, ``maybe_combine_null_buffers`` per batch) and reads values straight from the Arrow
buffers, so it is slow but easy to check against the reference. Where the reference panics
(dictionaries, the null type) it applies the documented extension: a dictionary hashes as its
decoded values, a null-typed column as one null marker per row.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

import pyarrow as pa

NULL_MARKER = b"\x00"
UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}

Bits = list[bool] | None  # validity, None when the buffer is absent or has no nulls


def u16(v: int) -> bytes:
    return struct.pack("<H", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v & (2**64 - 1))


def type_bytes(t: pa.DataType) -> bytes:
    if pa.types.is_dictionary(t):
        return type_bytes(t.value_type)
    if pa.types.is_null(t):
        return u16(0)
    if pa.types.is_boolean(t):
        return u16(5)
    if pa.types.is_integer(t):
        return u16(1) + bytes([1 if pa.types.is_signed_integer(t) else 0]) + u64(t.bit_width)
    if pa.types.is_floating(t):
        return u16(2) + u64(t.bit_width)
    if pa.types.is_timestamp(t):
        tz = b"\x00" if t.tz is None else u64(len(t.tz.encode())) + t.tz.encode()
        return u16(9) + u16(UNITS[t.unit]) + tz
    if pa.types.is_date32(t):
        return u16(7) + u64(32) + u16(0)
    if pa.types.is_date64(t):
        return u16(7) + u64(64) + u16(1)
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return u16(8) + u64(t.bit_width) + u16(UNITS[t.unit])
    if pa.types.is_decimal(t):
        return u16(6) + u64(t.bit_width) + u64(t.precision) + u64(t.scale)
    if t in (pa.binary(), pa.large_binary(), pa.binary_view()) or pa.types.is_fixed_size_binary(t):
        return u16(3)
    if t in (pa.string(), pa.large_string(), pa.string_view()):
        return u16(4)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return u16(11) + type_bytes(t.value_type)
    raise NotImplementedError(str(t))


def bits_of(array: pa.Array) -> Bits:
    """``array.to_data().nulls()``: absent when there are no nulls."""
    if array.null_count == 0:
        return None
    if pa.types.is_null(array.type):
        return [False] * len(array)
    buf = array.buffers()[0].to_pybytes()
    return [
        bool(buf[(array.offset + i) // 8] >> ((array.offset + i) % 8) & 1)
        for i in range(len(array))
    ]


def maybe_combine(a: Bits, b: Bits) -> Bits:
    a_nulls = a is not None and not all(a)
    b_nulls = b is not None and not all(b)
    if a_nulls and b_nulls:
        assert a is not None and b is not None
        return [x or y for x, y in zip(a, b, strict=True)]  # buffer_bin_or
    if a_nulls:
        return a
    if b_nulls:
        return b
    return None


def value_bytes(array: pa.Array, width: int, i: int) -> bytes:
    buf = array.buffers()[1]
    start = (array.offset + i) * width
    return bytes(buf[start : start + width].to_pybytes())


class ArrayDigest:
    def __init__(self, data_type: pa.DataType) -> None:
        self.hasher = hashlib.sha3_256(type_bytes(data_type))

    def update(self, array: pa.Array, parent: Bits) -> None:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        nulls = maybe_combine(parent, bits_of(array))
        t = array.type
        h = self.hasher
        bools = array.buffers()[1].to_pybytes() if pa.types.is_boolean(t) else b""
        for i in range(len(array)):
            if (nulls is not None and not nulls[i]) or pa.types.is_null(t):
                h.update(NULL_MARKER)
            elif pa.types.is_boolean(t):
                bit = bools[(array.offset + i) // 8] >> ((array.offset + i) % 8) & 1
                h.update(bytes([bit + 1]))
            elif pa.types.is_fixed_size_binary(t) and not pa.types.is_decimal(t):
                h.update(u64(t.byte_width))
                h.update(value_bytes(array, t.byte_width, i))
            elif t in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary()):
                large = t in (pa.large_string(), pa.large_binary())
                fmt, size = ("<q", 8) if large else ("<i", 4)
                offs = array.buffers()[1]
                lo = struct.unpack(fmt, offs[(array.offset + i) * size :][:size])[0]
                hi = struct.unpack(fmt, offs[(array.offset + i + 1) * size :][:size])[0]
                h.update(u64(hi - lo))
                h.update(array.buffers()[2][lo:hi].to_pybytes())
            elif t in (pa.string_view(), pa.binary_view()):
                value = array[i].as_py()
                raw = value.encode() if isinstance(value, str) else value
                h.update(u64(len(raw)))
                h.update(raw)
            elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
                sub = list_value(array, i)
                h.update(u64(len(sub)))
                self.update(sub, None)
            else:
                width = t.bit_width // 8
                h.update(value_bytes(array, width, i))


def list_value(array: pa.Array, i: int) -> pa.Array:
    """``array.value(i)`` of arrow-rs: the slot's sub-array per the offsets."""
    t = array.type
    if pa.types.is_fixed_size_list(t):
        lo = (array.offset + i) * t.list_size
        return array.values.slice(lo, t.list_size)
    fmt, size = ("<q", 8) if pa.types.is_large_list(t) else ("<i", 4)
    offs = array.buffers()[1]
    lo = struct.unpack(fmt, offs[(array.offset + i) * size :][:size])[0]
    hi = struct.unpack(fmt, offs[(array.offset + i + 1) * size :][:size])[0]
    return array.values.slice(lo, hi - lo)


class RecordDigest:
    def __init__(self, schema: pa.Schema) -> None:
        self.hasher = hashlib.sha3_256()
        self.columns: list[ArrayDigest] = []
        self._walk_fields(list(schema), 0)

    def _walk_fields(self, fields: list[pa.Field], level: int) -> None:
        for f in fields:
            self.hasher.update(u64(len(f.name.encode())) + f.name.encode() + u64(level))
            if pa.types.is_struct(f.type):
                self._walk_fields(list(f.type), level + 1)
            else:
                self.columns.append(ArrayDigest(f.type))

    def update(self, batch: pa.RecordBatch) -> None:
        leaves: list[tuple[pa.Array, Bits]] = []
        self._walk_columns(batch.columns, None, leaves)
        for column, (array, parent) in zip(self.columns, leaves, strict=True):
            column.update(array, parent)

    def _walk_columns(
        self, arrays: Iterable[pa.Array], parent: Bits, out: list[tuple[pa.Array, Bits]]
    ) -> None:
        for array in arrays:
            if pa.types.is_struct(array.type):
                combined = maybe_combine(parent, bits_of(array))
                children = [array.field(i) for i in range(array.type.num_fields)]
                self._walk_columns(children, combined, out)
            else:
                out.append((array, parent))

    def digest(self) -> bytes:
        for c in self.columns:
            self.hasher.update(c.hasher.digest())
        return self.hasher.digest()


def reference_digest(table: pa.Table, batch_rows: int = 10_000) -> bytes:
    """The reference digest of ``table`` read in batches of ``batch_rows`` (kamu's reader)."""
    digest = RecordDigest(table.schema)
    for start in range(0, table.num_rows, batch_rows):
        for batch in table.slice(start, batch_rows).combine_chunks().to_batches():
            digest.update(batch)
    return digest.digest()
