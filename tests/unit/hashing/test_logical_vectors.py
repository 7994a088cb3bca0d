"""Logical hash vectors: the kamu-cli value, byte streams by the reference's rules, and the
tests of arrow-digest itself (``src/array_digest.rs``, ``src/record_digest.rs``) rewritten."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import struct

import numpy as np
import pyarrow as pa
import pytest

from common.hashing import LogicalHasher, UnsupportedTypeError, logical_hash
from common.odf.errors import ValidationError
from common.odf.multihash import ARROW0_SHA3_256, Multihash


def u16(v: int) -> bytes:
    return struct.pack("<H", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def name(text: str, level: int = 0) -> bytes:
    return u64(len(text.encode())) + text.encode() + u64(level)


def expected(names: bytes, *columns: bytes) -> bytes:
    """The record digest from the schema bytes and each column's full byte stream."""
    final = hashlib.sha3_256(names)
    for column in columns:
        final.update(hashlib.sha3_256(column).digest())
    return final.digest()


def single(array: pa.Array) -> bytes:
    return logical_hash(pa.table({"c": array})).digest


# -- kamu-cli -------------------------------------------------------------------------------


def test_kamu_query_result_vector() -> None:
    """``dataHash`` of ``test_data_query_handler_full`` (kamu-cli f92b4f25d, adapter/http)."""
    table = pa.table(
        {
            "offset": pa.array([1, 0], pa.int64()),
            "city": pa.array(["B", "A"], pa.string()),
            "population": pa.array([200, 100], pa.uint64()),
        }
    )
    result = logical_hash(table)
    assert result.code == ARROW0_SHA3_256
    assert result.to_multibase() == (
        "f9680c001200b3483eecc3d5c6b50ee6b8cba11b51c08f89ea1f53d3a334c743199f5fe656e"
    )
    assert result == Multihash.from_multibase(result.to_multibase())


# -- byte streams by the rules of the reference's README ------------------------------------

INT32 = u16(1) + b"\x01" + u64(32)
STREAMS = [
    (pa.array([1, None, 3], pa.int32()), INT32 + u64(1)[:4] + b"\x00" + u64(3)[:4]),
    (pa.array([255, 0], pa.uint8()), u16(1) + b"\x00" + u64(8) + b"\xff\x00"),
    (pa.array([-2], pa.int64()), u16(1) + b"\x01" + u64(64) + b"\xfe" + b"\xff" * 7),
    (pa.array([1.0], pa.float64()), u16(2) + u64(64) + struct.pack("<d", 1.0)),
    (pa.array([1.5], pa.float32()), u16(2) + u64(32) + struct.pack("<f", 1.5)),
    (
        pa.array(np.array([1.0], np.float16)),
        u16(2) + u64(16) + np.array([1.0], np.float16).tobytes(),
    ),
    (pa.array([True, None, False]), u16(5) + b"\x02\x00\x01"),
    (pa.array(["ab", None, ""]), u16(4) + u64(2) + b"ab" + b"\x00" + u64(0)),
    (pa.array([b"\x00\x01"], pa.large_binary()), u16(3) + u64(2) + b"\x00\x01"),
    (pa.array([b"xyz", None], pa.binary(3)), u16(3) + u64(3) + b"xyz" + b"\x00"),
    (pa.array([dt.date(1970, 1, 2)]), u16(7) + u64(32) + u16(0) + u64(1)[:4]),
    (pa.array([86_400_000], pa.date64()), u16(7) + u64(64) + u16(1) + u64(86_400_000)),
    (pa.array([5], pa.time32("ms")), u16(8) + u64(32) + u16(1) + u64(5)[:4]),
    (pa.array([5], pa.time64("ns")), u16(8) + u64(64) + u16(3) + u64(5)),
    (pa.array([7], pa.timestamp("s")), u16(9) + u16(0) + b"\x00" + u64(7)),
    (pa.array([7], pa.timestamp("us", "UTC")), u16(9) + u16(2) + u64(3) + b"UTC" + u64(7)),
    (
        pa.array([decimal.Decimal("1.23")], pa.decimal128(5, 2)),
        u16(6) + u64(128) + u64(5) + u64(2) + (123).to_bytes(16, "little"),
    ),
    (
        pa.array([decimal.Decimal("-1")], pa.decimal256(40, 0)),
        u16(6) + u64(256) + u64(40) + u64(0) + b"\xff" * 32,
    ),
    (
        pa.array([decimal.Decimal("1.23")], pa.decimal32(5, 2)),
        u16(6) + u64(32) + u64(5) + u64(2) + (123).to_bytes(4, "little"),
    ),
    (
        pa.array([decimal.Decimal("1.23")], pa.decimal64(12, 2)),
        u16(6) + u64(64) + u64(12) + u64(2) + (123).to_bytes(8, "little"),
    ),
    (
        pa.array([None], pa.decimal128(5, -2)),  # a negative scale is sign-extended to u64
        u16(6) + u64(128) + u64(5) + b"\xfe" + b"\xff" * 7 + b"\x00",
    ),
    (
        pa.array([[1, None], None, []], pa.list_(pa.int8())),
        u16(11) + u16(1) + b"\x01" + u64(8) + u64(2) + b"\x01\x00" + b"\x00" + u64(0),
    ),
    (
        pa.array([[["a"]], [None, []]], pa.large_list(pa.list_(pa.string()))),
        u16(11) + u16(11) + u16(4) + u64(1) + u64(1) + u64(1) + b"a" + u64(2) + b"\x00" + u64(0),
    ),
    (
        pa.array([[1, 2], None], pa.list_(pa.int16(), 2)),
        u16(11) + u16(1) + b"\x01" + u64(16) + u64(2) + b"\x01\x00\x02\x00" + b"\x00",
    ),
    (pa.nulls(3), u16(0) + b"\x00\x00\x00"),
    (pa.array(["x", None, "x"]).dictionary_encode(), u16(4) + u64(1) + b"x\x00" + u64(1) + b"x"),
]


@pytest.mark.parametrize(("array", "stream"), STREAMS, ids=[str(a.type) for a, _ in STREAMS])
def test_column_byte_stream(array: pa.Array, stream: bytes) -> None:
    assert single(array) == expected(name("c"), stream)


def test_schema_is_walked_depth_first_with_levels() -> None:
    table = pa.table(
        {
            "a": pa.array([1], pa.int32()),
            "s": pa.array([{"x": "v", "t": {"y": True}}]),
            "é": pa.array([2], pa.int32()),
        }
    )
    names = name("a") + name("s") + name("x", 1) + name("t", 1) + name("y", 2) + name("é")
    columns = [INT32 + u64(1)[:4], u16(4) + u64(1) + b"v", u16(5) + b"\x02", INT32 + u64(2)[:4]]
    assert logical_hash(table).digest == expected(names, *columns)


def test_no_rows_hashes_the_schema_and_types() -> None:
    schema = pa.schema([pa.field("a", pa.int32()), pa.field("b", pa.string())])
    assert logical_hash([], schema=schema).digest == expected(name("a") + name("b"), INT32, u16(4))
    assert logical_hash(schema.empty_table()) == logical_hash([], schema=schema)


def test_one_byte_zero_and_null_collide_like_the_reference() -> None:
    """The reference marks a null with one 0x00 byte, which is also int8 zero."""
    assert single(pa.array([0], pa.int8())) == single(pa.array([None], pa.int8()))
    assert single(pa.array([0, None], pa.int16())) == single(pa.array([None, 0], pa.int16()))


# -- arrow-digest's own tests ---------------------------------------------------------------


def test_ints() -> None:
    assert single(pa.array([1, 2, 3], pa.int32())) == single(pa.array([1, 2, 3], pa.int32()))
    assert single(pa.array([1, 2, 3], pa.int32())) != single(pa.array([1, 2, None, 3], pa.int32()))
    assert single(pa.array([1, 2, 3], pa.int32())) != single(pa.array([1, 2, 3], pa.uint32()))


def _bools(values: int, length: int, nulls: int | None = None) -> pa.Array:
    validity = None if nulls is None else pa.py_buffer(bytes([nulls]))
    return pa.Array.from_buffers(pa.bool_(), length, [validity, pa.py_buffer(bytes([values]))])


def test_bool_array() -> None:
    array1 = _bools(0b0011_0101, 6)
    array2 = _bools(0b1111_0101, 6)  # bits past the length do not count
    assert single(array1) == single(pa.array([True, False, True, False, True, True]))
    assert single(array1) != single(pa.array([True, False, True, False, True, False]))
    assert single(array1) != single(pa.array([False, False, True, False, True, True]))
    assert single(array1) == single(array2)
    array3 = _bools(0b1111_0101, 6, nulls=0b1110_1110)
    assert single(array3) == single(pa.array([None, False, True, False, None, True]))


def test_string_array() -> None:
    foo = pa.array(["foo", "bar", "baz"])
    assert single(foo) == single(pa.array(["foo", "bar", "baz"]))
    assert single(foo) == single(pa.array(["foo", "bar", "baz"], pa.large_string()))
    assert single(foo) == single(pa.array(["foo", "bar", "baz"], pa.string_view()))
    assert single(foo) != single(pa.array(["foo", "bar", "", "baz"]))
    assert single(foo) != single(pa.array(["foo", "bar", None, "baz"]))


def test_list_array() -> None:
    data = [[0, 1, 2], None, [3, None, 4, 5], [6, 7]]
    list_type = pa.list_(pa.int32())
    assert single(pa.array(data, list_type)) == single(pa.array(data, list_type))
    changed = [[0, 1, 2], None, [3, None, 4, 100], [6, 7]]
    assert single(pa.array(data, list_type)) != single(pa.array(changed, list_type))
    slid = [[0, 1, 2], None, [3, None, 4], [5, 6, 7]]
    assert single(pa.array(data, list_type)) != single(pa.array(slid, list_type))


def test_binary_array() -> None:
    values = [b"one", b"two", b"", b"three"]
    assert single(pa.array(values)) == single(pa.array(values))
    assert single(pa.array(values)) != single(pa.array([b"one", b"two", b"three"]))
    assert single(pa.array(values)) == single(pa.array(values, pa.binary_view()))
    assert single(pa.array(values)) != single(pa.array([b"one", b"two", None, b"three"]))
    fixed = pa.Array.from_buffers(pa.binary(3), 2, [None, pa.py_buffer(b"onetwo")])
    assert single(pa.array([b"one", b"two"])) == single(fixed)


def test_batch_mixed() -> None:
    batch1 = pa.table({"a": pa.array([1, 2, 3, 4, 5], pa.int32()), "b": list("abcde")})
    batch3 = pa.table({"a": pa.array([1, 2, 3, 4, 5, 6], pa.int32()), "b": list("abcded")})
    assert logical_hash(batch1) == logical_hash(batch1.to_batches()[0])
    assert logical_hash(batch1) != logical_hash(batch3)


def test_batch_nested() -> None:
    a = pa.array([1, 2, 3], pa.int32())
    c, d = pa.array(["a", "b", "c"]), pa.array([3, 2, 1], pa.int32())

    def table(struct_name: str = "b", validity: list[bool] | None = None) -> pa.Table:
        mask = None if validity is None else pa.array([not v for v in validity])
        b = pa.StructArray.from_arrays([c, d], names=["c", "d"], mask=mask)
        return pa.table({"a": a, struct_name: b})

    assert logical_hash(table()) == logical_hash(table())
    assert logical_hash(table()) != logical_hash(table("bee"))
    assert logical_hash(table()) == logical_hash(table(validity=[True, True, True]))
    assert logical_hash(table()) != logical_hash(table(validity=[True, False, True]))


# -- errors ---------------------------------------------------------------------------------

UNSUPPORTED = [
    (pa.field("d", pa.duration("s")), "'d'"),
    (pa.field("i", pa.month_day_nano_interval()), "'i'"),
    (pa.field("m", pa.map_(pa.string(), pa.int32())), "'m'"),
    (pa.field("l", pa.list_(pa.struct([pa.field("x", pa.int8())]))), "'l'"),
    (pa.field("s", pa.struct([pa.field("x", pa.duration("ms"))])), "'s.x'"),
    (pa.field("u", pa.dense_union([pa.field("x", pa.int8())])), "'u'"),
    (pa.field("v", pa.list_view(pa.int8())), "'v'"),
]


@pytest.mark.parametrize(("field", "column"), UNSUPPORTED, ids=[f.name for f, _ in UNSUPPORTED])
def test_unsupported_type_names_the_column(field: pa.Field, column: str) -> None:
    with pytest.raises(UnsupportedTypeError, match=f"column {column}: type .* is not supported"):
        LogicalHasher(pa.schema([pa.field("ok", pa.int8()), field]))


def test_batches_must_match_the_schema() -> None:
    hasher = LogicalHasher(pa.schema([pa.field("a", pa.int32())]))
    hasher.update(pa.record_batch({"a": pa.array([1], pa.int32()).dictionary_encode()}))
    with pytest.raises(ValidationError, match="does not match"):
        hasher.update(pa.record_batch({"a": pa.array([1], pa.int64())}))
    with pytest.raises(ValidationError, match="does not match"):
        hasher.update(pa.record_batch({"b": pa.array([1], pa.int32())}))


def test_an_empty_stream_needs_a_schema() -> None:
    with pytest.raises(ValidationError, match="without a schema"):
        logical_hash([])
