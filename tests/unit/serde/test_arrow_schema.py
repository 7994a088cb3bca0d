"""SetDataSchema Arrow schema bytes: arrow-rs 52 ``schema_to_fb`` layout and a defensive reader."""

from __future__ import annotations

import base64
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.odf.errors import DecodeError, ValidationError
from common.serde.arrow_schema import decode_arrow_schema, encode_arrow_schema
from common.serde.arrow_schema_tables import field_names

# kamu-cli f92b4f25d, src/domain/opendatafabric/tests/tests/test_serde_yaml.rs
# (serde_set_data_schema): arrow-rs 52 bytes of `a: Int64 not null, b: Boolean not null`.
KAMU_SCHEMA_B64 = (
    "DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEAAABi"
    "AAAAEAAUABAAAAAPAAQAAAAIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAAAQAAAGEA"
    "AAA="
)
KAMU_SCHEMA = pa.schema([pa.field("a", pa.int64(), False), pa.field("b", pa.bool_(), False)])


def same(a: pa.Schema, b: pa.Schema) -> bool:
    return bool(a.equals(b, check_metadata=True))


def test_kamu_vector_is_reproduced_byte_for_byte() -> None:
    expected = base64.b64decode(KAMU_SCHEMA_B64)
    assert len(expected) == 140
    assert encode_arrow_schema(KAMU_SCHEMA) == expected
    assert same(decode_arrow_schema(expected), KAMU_SCHEMA)


# Layouts derived by hand from the flatbuffers-rs 24.3.25 builder rules and the arrow-ipc
# 52.0.0 call order (see common/serde/arrow_schema.py). Each line is 4 bytes at the address
# on the left; only the interesting words are annotated.
HAND_CHECKED = {
    "timestamp_ms_utc": (
        pa.schema([pa.field("t", pa.timestamp("ms", "UTC"))]),
        """
        00: 0c000000  root -> Schema table at 0x0c
        04: 08000800  Schema vtable: 8 bytes, object 8
        08: 00000400    endianness absent, fields @+4
        0c: 08000000  Schema table
        10: 04000000    fields -> 0x14
        14: 01000000  fields vector: 1 element
        18: 14000000    -> Field table at 0x2c
        1c: 10001400  Field vtable: 16 bytes, object 20
        20: 10000e00    name @16, nullable @14
        24: 0f000400    type_type @15, type @4
        28: 00000800    dictionary absent, children @8
        2c: 10000000  Field table
        30: 1c000000    type -> Timestamp table at 0x4c
        34: 0c000000    children -> 0x40
        38: 0000010a    pad, nullable=1, type_type=10 (Timestamp)
        3c: 24000000    name -> 0x60
        40: 00000000  children: empty vector, built after the Timestamp table
        44: 08000c00  Timestamp vtable: 8 bytes, object 12
        48: 0a000400    unit @10, timezone @4
        4c: 08000000  Timestamp table
        50: 08000000    timezone -> 0x58
        54: 00000100    pad, unit=1 (MILLISECOND)
        58: 03000000  "UTC", created before the Timestamp table
        5c: 55544300
        60: 01000000  "t", the Field name, created first
        64: 74000000
        """,
    ),
    "timestamp_ns_naive_orphan_tz_string": (
        pa.schema([pa.field("t", pa.timestamp("ns"))]),
        """
        00: 0c000000
        04: 08000800
        08: 00000400
        0c: 08000000
        10: 04000000
        14: 01000000
        18: 14000000
        1c: 10001400
        20: 10000e00
        24: 0f000400
        28: 00000800
        2c: 10000000
        30: 1c000000    type -> 0x4c
        34: 0c000000
        38: 0000010a
        3c: 20000000    name -> 0x5c
        40: 00000000  children
        44: 00000600  pad, Timestamp vtable at 0x46: 6 bytes,
        48: 08000600    object 8, unit @6 (no timezone slot)
        4c: 06000000  Timestamp table
        50: 00000300    pad, unit=3 (NANOSECOND)
        54: 00000000  orphan empty tz string: length 0,
        58: 00000000    terminator + pad, referenced by nothing
        5c: 01000000  "t"
        60: 74000000
        """,
    ),
    "date32_not_null_and_utf8": (
        pa.schema([pa.field("d", pa.date32(), False), pa.field("s", pa.utf8())]),
        """
        00: 0c000000
        04: 08000800
        08: 00000400
        0c: 08000000
        10: 04000000
        14: 02000000  fields vector: 2 elements
        18: 50000000    [0] -> Field d at 0x68
        1c: 14000000    [1] -> Field s at 0x30
        20: 10001400  Field s vtable (nullable)
        24: 10000e00
        28: 0f000400
        2c: 00000800
        30: 10000000  Field s
        34: 18000000    type -> Utf8 table at 0x4c
        38: 0c000000    children -> 0x44
        3c: 00000105    pad, nullable=1, type_type=5 (Utf8)
        40: 10000000    name -> 0x50
        44: 00000000  children of s: created after the Utf8 table
        48: 04000400  Utf8 vtable: empty table
        4c: 04000000  Utf8 table
        50: 01000000  "s"
        54: 73000000
        58: 10001400  Field d vtable: nullable slot 0 (false is not written)
        5c: 10000000
        60: 0f000400
        64: 00000800
        68: 10000000  Field d
        6c: 1c000000    type -> Date table at 0x88
        70: 0c000000    children -> 0x7c
        74: 00000008    pad, type_type=8 (Date)
        78: 18000000    name -> 0x90
        7c: 00000000  children of d: created after the Date table
        80: 00000600  pad, Date vtable at 0x82: 6 bytes,
        84: 08000600    object 8, unit @6
        88: 06000000  Date table
        8c: 00000000    pad, unit=0 (DAY, written: the default is MILLISECOND)
        90: 01000000  "d"
        94: 64000000
        """,
    ),
    "decimal128_not_null": (
        pa.schema([pa.field("x", pa.decimal128(10, 2), False)]),
        """
        00: 0c000000
        04: 08000800
        08: 00000400
        0c: 08000000
        10: 04000000
        14: 01000000
        18: 14000000
        1c: 10001400
        20: 10000000
        24: 0f000400
        28: 00000800
        2c: 10000000
        30: 1c000000    type -> Decimal at 0x4c
        34: 0c000000
        38: 00000007    type_type=7 (Decimal)
        3c: 1c000000
        40: 00000000  children: created after the Decimal table
        44: 08000c00  Decimal vtable: precision @8, scale @4,
        48: 08000400    bitWidth 128 is the default: absent
        4c: 08000000  Decimal table
        50: 02000000    scale=2 (added second)
        54: 0a000000    precision=10 (added first)
        58: 01000000  "x"
        5c: 78000000
        """,
    ),
    "list_of_int32_not_null": (
        pa.schema([pa.field("l", pa.list_(pa.field("item", pa.int32())), False)]),
        """
        00: 0c000000
        04: 08000800
        08: 00000400
        0c: 08000000
        10: 04000000
        14: 01000000
        18: 14000000
        1c: 10001400  outer Field vtable
        20: 10000000
        24: 0f000400
        28: 00000800
        2c: 10000000  outer Field l
        30: 1c000000    type -> List table at 0x4c
        34: 0c000000    children -> 0x40
        38: 0000000c    type_type=12 (List)
        3c: 5c000000    name -> 0x98
        40: 01000000  children vector [item], built after the List table
        44: 1c000000    -> Field item at 0x60
        48: 04000400  List vtable: empty table, built after the child Field
        4c: 04000000  List table
        50: 10001400  Field item vtable
        54: 10000e00
        58: 0f000400
        5c: 00000800
        60: 10000000  Field item
        64: 18000000    type -> Int table at 0x7c
        68: 20000000    children -> 0x88
        6c: 00000102    nullable=1, type_type=2 (Int)
        70: 1c000000    name -> 0x8c
        74: 08000c00  Int vtable: bitWidth @4, is_signed @11
        78: 04000b00
        7c: 08000000  Int table
        80: 20000000    bitWidth=32 (added second)
        84: 00000001    pad, is_signed=1 (added first)
        88: 00000000  children of item: created BEFORE the Int table
        8c: 04000000  "item"
        90: 6974656d
        94: 00000000
        98: 01000000  "l", created before the List's child
        9c: 6c000000
        """,
    ),
}


def _hex_dump(text: str) -> bytes:
    out = bytearray()
    for line in text.strip().splitlines():
        address, rest = line.strip().split(":", 1)
        assert int(address, 16) == len(out), f"address {address} out of sequence"
        out += bytes.fromhex(rest.split()[0])
    return bytes(out)


@pytest.mark.parametrize("name", HAND_CHECKED)
def test_layout_matches_hand_derived_arrow_rs_bytes(name: str) -> None:
    schema, dump = HAND_CHECKED[name]
    expected = _hex_dump(dump)
    assert encode_arrow_schema(schema).hex() == expected.hex()
    assert same(decode_arrow_schema(expected), schema)


def test_struct_children_are_built_in_order_before_the_struct_table() -> None:
    # Struct: every child Field (in order), then the Struct_ table, then the children vector.
    # The builder writes back to front, so earlier objects sit at higher addresses.
    schema = pa.schema(
        [pa.field("s", pa.struct([pa.field("a", pa.int8(), False), pa.field("b", pa.utf8())]))]
    )
    data = encode_arrow_schema(schema)
    field = _field_table(data, 0)
    struct_table = _ref(data, field, 3)
    children = _ref(data, field, 5)
    kids = [_deref(data, children + 4 + 4 * i) for i in range(_u32(data, children))]
    assert children < struct_table < kids[1] < kids[0]
    assert _ref(data, field, 0) > kids[0]  # the outer name string is created first
    assert same(decode_arrow_schema(data), schema)


# -- tiny raw-flatbuffer helpers for the tests above (the module's reader is under test) --


def _u32(data: bytes | bytearray, pos: int) -> int:
    return int(struct.unpack_from("<I", data, pos)[0])


def _deref(data: bytes | bytearray, pos: int) -> int:
    return pos + _u32(data, pos)


def _ref(data: bytes | bytearray, table: int, slot: int) -> int:
    vtable = table - struct.unpack_from("<i", data, table)[0]
    off = struct.unpack_from("<H", data, vtable + 4 + 2 * slot)[0]
    assert off, f"slot {slot} is absent"
    return _deref(data, table + off)


def _field_table(data: bytes | bytearray, index: int) -> int:
    fields = _ref(data, _deref(data, 0), 1)
    return _deref(data, fields + 4 + 4 * index)


# -- every type the project reads or writes -----------------------------------------------

TYPES = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "decimal128": pa.decimal128(38, 9),
    "decimal128_negative_scale": pa.decimal128(5, -2),
    "decimal256": pa.decimal256(76, 0),
    "bool": pa.bool_(),
    "utf8": pa.utf8(),
    "large_utf8": pa.large_utf8(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "fixed_size_binary": pa.binary(16),
    "utf8_view": pa.string_view(),
    "binary_view": pa.binary_view(),
    "date32": pa.date32(),
    "date64": pa.date64(),
    "time32_s": pa.time32("s"),
    "time32_ms": pa.time32("ms"),
    "time64_us": pa.time64("us"),
    "time64_ns": pa.time64("ns"),
    **{f"timestamp_{u}": pa.timestamp(u) for u in ("s", "ms", "us", "ns")},
    **{f"timestamp_{u}_utc": pa.timestamp(u, "UTC") for u in ("s", "ms", "us", "ns")},
    "timestamp_ms_offset_tz": pa.timestamp("ms", "+05:30"),
    "timestamp_us_named_tz": pa.timestamp("us", "America/New_York"),
    **{f"duration_{u}": pa.duration(u) for u in ("s", "ms", "us", "ns")},
    "interval_month_day_nano": pa.month_day_nano_interval(),
    "null": pa.null(),
    "list": pa.list_(pa.int64()),
    "list_not_null_item": pa.list_(pa.field("element", pa.utf8(), False)),
    "large_list": pa.large_list(pa.float64()),
    "fixed_size_list": pa.list_(pa.float32(), 3),
    "list_of_struct": pa.list_(pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.utf8())])),
    "struct": pa.struct([pa.field("a", pa.int8(), False), pa.field("b", pa.timestamp("ms"))]),
    "empty_struct": pa.struct([]),
    "nested_struct": pa.struct(
        [
            pa.field("inner", pa.struct([pa.field("deep", pa.list_(pa.date32()))]), False),
            pa.field("n", pa.decimal128(12, 4)),
        ]
    ),
    "map": pa.map_(pa.utf8(), pa.int32()),
    "map_keys_sorted": pa.map_(pa.int64(), pa.list_(pa.utf8()), keys_sorted=True),
    "dictionary": pa.dictionary(pa.int32(), pa.utf8()),
    "dictionary_ordered_uint8": pa.dictionary(pa.uint8(), pa.large_utf8(), ordered=True),
    "dictionary_int64_of_date": pa.dictionary(pa.int64(), pa.date32()),
    "sparse_union": pa.sparse_union([pa.field("i", pa.int32()), pa.field("s", pa.utf8())]),
    "dense_union_codes": pa.dense_union(
        [pa.field("i", pa.int32()), pa.field("s", pa.utf8())], type_codes=[5, 9]
    ),
    "run_end_encoded": pa.run_end_encoded(pa.int32(), pa.utf8()),
}


# pyarrow has no non-nullable Null field (see the test below for arrow-rs's)
ROUND_TRIPS = [
    (n, nullable) for n in TYPES for nullable in (True, False) if n != "null" or nullable
]


@pytest.mark.parametrize(("name", "nullable"), ROUND_TRIPS, ids=lambda v: str(v))
def test_every_type_round_trips(name: str, nullable: bool) -> None:
    schema = pa.schema(
        [pa.field("offset", pa.int64(), False), pa.field(name, TYPES[name], nullable)]
    )
    data = encode_arrow_schema(schema)
    decoded = decode_arrow_schema(data)
    assert same(decoded, schema)
    assert encode_arrow_schema(decoded) == data


def test_non_nullable_null_field_as_arrow_rs_writes_it_reads_as_nullable() -> None:
    data = bytearray(encode_arrow_schema(pa.schema([pa.field("n", pa.null())])))
    # drop the nullable slot from the Field vtable: what arrow-rs writes for nullable=false
    field = _field_table(data, 0)
    vtable = field - struct.unpack_from("<i", data, field)[0]
    struct.pack_into("<H", data, vtable + 4 + 2 * 1, 0)
    decoded = decode_arrow_schema(bytes(data))
    assert same(decoded, pa.schema([pa.field("n", pa.null())]))


@pytest.mark.parametrize("name", TYPES)
def test_reads_pyarrow_cpp_layout(name: str) -> None:
    # The C++ builder behind pyarrow orders and pads tables differently: the reader must only
    # rely on vtables, so the same schema decodes from either layout.
    schema = pa.schema(
        [pa.field(name, TYPES[name], metadata={"z": "1", "a": "2"})], metadata={"k": "v"}
    )
    assert same(decode_arrow_schema(_pyarrow_schema_flatbuffer(schema)), schema)


def _pyarrow_schema_flatbuffer(schema: pa.Schema) -> bytes:
    """pyarrow's IPC message for ``schema``, re-rooted at its Schema table."""
    message: bytes = schema.serialize().to_pybytes()
    assert message[:4] == b"\xff\xff\xff\xff"
    (length,) = struct.unpack_from("<i", message, 4)
    body = message[8 : 8 + length]
    header = _ref(body, _deref(body, 0), 2)  # Message.header
    return struct.pack("<I", header + 4) + body


def test_metadata_is_written_sorted_and_read_in_any_order() -> None:
    forward = pa.schema(
        [pa.field("a", pa.utf8(), metadata={"x": "1", "b": "2", "m": "3"})],
        metadata={"odf.z": "last", "odf.a": "first"},
    )
    backward = pa.schema(
        [pa.field("a", pa.utf8(), metadata={"m": "3", "b": "2", "x": "1"})],
        metadata={"odf.a": "first", "odf.z": "last"},
    )
    data = encode_arrow_schema(forward)
    assert data == encode_arrow_schema(backward)
    assert data.index(b"odf.a") > data.index(b"odf.z")  # first entry written first = higher
    assert same(decode_arrow_schema(data), forward)
    # pyarrow keeps insertion order, so its bytes hold the entries unsorted
    assert same(decode_arrow_schema(_pyarrow_schema_flatbuffer(forward)), backward)


def test_empty_schema_and_unicode_names() -> None:
    for schema in (
        pa.schema([]),
        pa.schema([pa.field("größe", pa.float64()), pa.field("", pa.int8())], metadata={"é": "ü"}),
    ):
        assert same(decode_arrow_schema(encode_arrow_schema(schema)), schema)


@pytest.mark.parametrize(
    "dtype",
    [pa.list_view(pa.int8()), pa.large_list_view(pa.int8()), pa.decimal32(5, 2)],
    ids=str,
)
def test_types_arrow_rs_52_cannot_write_are_rejected(dtype: pa.DataType) -> None:
    with pytest.raises(ValidationError, match="cannot be written by arrow-rs 52"):
        encode_arrow_schema(pa.schema([pa.field("x", dtype)]))


# -- malformed input --------------------------------------------------------------------


def test_every_truncation_of_a_valid_schema_is_a_decode_error() -> None:
    data = encode_arrow_schema(
        pa.schema([pa.field("s", pa.struct([pa.field("t", pa.timestamp("ms", "UTC"))]))])
    )
    assert data.endswith(b"s\0\0\0")  # the last object: name "s", terminator, 2 bytes of pad
    for n in range(len(data) - 2):
        with pytest.raises(DecodeError, match="Arrow schema"):
            decode_arrow_schema(data[:n])
    for n in range(len(data) - 2, len(data)):  # only padding cut off: still a valid buffer
        assert decode_arrow_schema(data[:n]).field(0).name == "s"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "only 0 bytes"),
        (b"\x0c\x00\x00", "only 3 bytes"),
        (b"\xff\xff\xff\xff\x10\x00\x00\x00" + b"\x00" * 16, "continuation marker"),
        (b"\x00" * 16, "outside the 16-byte buffer"),
        (b"\x08\x00\x00\x00" + b"\x00" * 12, "invalid length"),
        (b"garbage garbage garbage", "Arrow schema"),
    ],
)
def test_garbage_is_a_clear_decode_error(data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode_arrow_schema(data)


def test_error_names_the_field_path() -> None:
    schema = pa.schema([pa.field("a", pa.int8()), pa.field("b", pa.list_(pa.int16()))])
    data = bytearray(encode_arrow_schema(schema))
    # corrupt the list child's Int bitWidth (16 -> 17)
    child = _deref(data, _ref(data, _field_table(data, 1), 5) + 4)
    int_table = _ref(data, child, 3)
    vtable = int_table - struct.unpack_from("<i", data, int_table)[0]
    width_at = int_table + struct.unpack_from("<H", data, vtable + 4)[0]
    assert _u32(data, width_at) == 16
    struct.pack_into("<i", data, width_at, 17)
    with pytest.raises(DecodeError) as err:
        decode_arrow_schema(bytes(data))
    assert str(err.value).startswith("fields[1].children[0].type: invalid Arrow schema")
    assert "bitWidth 17" in str(err.value)


def test_shared_offsets_cannot_blow_up() -> None:
    # A list whose child vector points back at the same Field table again and again: valid
    # bounds everywhere, but an unbounded tree. The reader stops with a DecodeError.
    data = bytearray(encode_arrow_schema(pa.schema([pa.field("l", pa.list_(pa.int8()))])))
    field = _field_table(data, 0)
    children = _ref(data, field, 5)
    struct.pack_into("<I", data, children + 4, field - (children + 4) & 0xFFFFFFFF)
    with pytest.raises(DecodeError):
        decode_arrow_schema(bytes(data))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_bytes_decode_or_raise_decode_error(data: st.DataObject) -> None:
    original = bytearray(data.draw(st.sampled_from(_MUTATION_SEEDS)))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(original) - 1))
        original[at] = data.draw(st.integers(0, 255))
    try:
        decoded = decode_arrow_schema(bytes(original))
    except DecodeError:
        return
    assert isinstance(decoded, pa.Schema)


_MUTATION_SEEDS = [
    base64.b64decode(KAMU_SCHEMA_B64),
    encode_arrow_schema(pa.schema([pa.field(n, t) for n, t in list(TYPES.items())[::5]])),
    encode_arrow_schema(
        pa.schema([pa.field("m", TYPES["map"]), pa.field("u", TYPES["dense_union_codes"])])
    ),
]


# -- generated schemas --------------------------------------------------------------------

_LEAVES = st.sampled_from(
    [t for t in TYPES.values() if not isinstance(t, (pa.ListType, pa.StructType, pa.MapType))]
)
_NAMES = st.text(min_size=0, max_size=6)
_METADATA = st.none() | st.dictionaries(
    st.text(min_size=1, max_size=5), st.text(max_size=5), max_size=3
)


def _field(name: str, dtype: pa.DataType, nullable: bool, metadata: dict[str, str]) -> pa.Field:
    return pa.field(name, dtype, nullable or dtype == pa.null(), metadata)


def _fields(types: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.Field]:
    return st.builds(_field, _NAMES, types, st.booleans(), _METADATA)


_TYPES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.builds(pa.list_, _fields(inner))
        | st.builds(pa.large_list, _fields(inner))
        | st.builds(pa.struct, st.lists(_fields(inner), max_size=3))
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_fields(_TYPES), max_size=5), _METADATA)
def test_generated_schemas_round_trip(fields: list[pa.Field], metadata: dict[str, str]) -> None:
    schema = pa.schema(fields, metadata=metadata)
    data = encode_arrow_schema(schema)
    assert same(decode_arrow_schema(data), schema)
    assert same(decode_arrow_schema(_pyarrow_schema_flatbuffer(schema)), schema)


@pytest.mark.parametrize("name", sorted(TYPES))
def test_field_names_are_read_without_pyarrow_as_the_full_reader_reads_them(name: str) -> None:
    schema = pa.schema([pa.field("offset", pa.int64(), False), pa.field(name, TYPES[name])])
    data = encode_arrow_schema(schema)
    assert field_names(data) == decode_arrow_schema(data).names == ["offset", name]


def test_field_names_of_garbage_fail_as_the_full_reader_does() -> None:
    data = encode_arrow_schema(pa.schema([pa.field("s", pa.string())]))
    for cut in (b"", data[:3], data[:12], b"\xff\xff\xff\xff" + data):
        with pytest.raises(DecodeError) as full:
            decode_arrow_schema(cut)
        with pytest.raises(DecodeError) as names:
            field_names(cut)
        assert str(names.value) == str(full.value)
