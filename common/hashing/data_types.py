"""Arrow data types as seen by the logical hash (arrow-digest ``schema_digest``).

Each leaf column's hasher starts with the bytes of its data type. The encoding follows the
reference (``arrow-digest`` 52, used by kamu-cli in 2024): a little-endian ``u16`` type id
followed by type parameters. Types that differ only in their physical encoding hash the same:
``utf8``/``large_utf8``/``utf8_view``, ``binary``/``large_binary``/``fixed_size_binary``/
``binary_view``, ``list``/``large_list``/``fixed_size_list``, and a dictionary hashes as its
value type.

``leaf_layout`` tells the value encoder how a (dictionary-decoded) type is laid out in memory.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import pyarrow as pa

from common.odf.errors import ValidationError


class UnsupportedTypeError(ValidationError):
    """A column has an Arrow type that the logical hash cannot digest."""

    def __init__(self, column: str, data_type: pa.DataType) -> None:
        self.column = column
        self.data_type = data_type
        super().__init__(
            f"type {data_type} is not supported by the logical hash", path=f"column {column!r}"
        )

    def at(self, prefix: str) -> ValidationError:
        return self


class TypeID(enum.IntEnum):
    """Type ids of the reference (``Schema.fbs`` type union order)."""

    NULL = 0
    INT = 1
    FLOATING_POINT = 2
    BINARY = 3
    UTF8 = 4
    BOOL = 5
    DECIMAL = 6
    DATE = 7
    TIME = 8
    TIMESTAMP = 9
    LIST = 11


TIME_UNIT_IDS = {"s": 0, "ms": 1, "us": 2, "ns": 3}
DATE_UNIT_DAY = 0
DATE_UNIT_MILLISECOND = 1


class Layout(enum.Enum):
    """How the values of a leaf column are read from its Arrow buffers."""

    NULL = "null"  # no buffers, every value is null
    BOOL = "bool"  # bit-packed values
    FIXED = "fixed"  # ``width`` little-endian bytes per value
    BINARY = "binary"  # variable-size bytes (offsets + data, or fixed-size binary)
    LIST = "list"  # variable-size lists of a child type


@dataclass(frozen=True, slots=True)
class LeafLayout:
    layout: Layout
    width: int = 0  # bytes per value, for FIXED


def _u16(value: int) -> bytes:
    return struct.pack("<H", value)


def _u64(value: int) -> bytes:
    # Rust's `as u64` on a negative i8 (a decimal scale) sign-extends; mask to the same bits.
    return struct.pack("<Q", value & 0xFFFF_FFFF_FFFF_FFFF)


def _int_width(data_type: pa.DataType) -> int | None:
    if pa.types.is_integer(data_type):
        return int(data_type.bit_width)
    return None


def data_type_bytes(data_type: pa.DataType, column: str) -> bytes:
    """The bytes a column hasher is seeded with; ``column`` names the column in errors."""
    t = pa.types
    if t.is_dictionary(data_type):
        return data_type_bytes(data_type.value_type, column)
    if t.is_null(data_type):
        return _u16(TypeID.NULL)
    if t.is_boolean(data_type):
        return _u16(TypeID.BOOL)
    bits = _int_width(data_type)
    if bits is not None:
        signed = 1 if t.is_signed_integer(data_type) else 0
        return _u16(TypeID.INT) + bytes([signed]) + _u64(bits)
    if t.is_floating(data_type):
        return _u16(TypeID.FLOATING_POINT) + _u64(data_type.bit_width)
    if t.is_timestamp(data_type):
        tz = data_type.tz
        tz_bytes = b"\x00" if tz is None else _u64(len(tz.encode())) + tz.encode()
        return _u16(TypeID.TIMESTAMP) + _u16(TIME_UNIT_IDS[data_type.unit]) + tz_bytes
    if t.is_date32(data_type):
        return _u16(TypeID.DATE) + _u64(32) + _u16(DATE_UNIT_DAY)
    if t.is_date64(data_type):
        return _u16(TypeID.DATE) + _u64(64) + _u16(DATE_UNIT_MILLISECOND)
    if t.is_time32(data_type) or t.is_time64(data_type):
        unit = TIME_UNIT_IDS[data_type.unit]
        return _u16(TypeID.TIME) + _u64(data_type.bit_width) + _u16(unit)
    if t.is_decimal(data_type):
        return (
            _u16(TypeID.DECIMAL)
            + _u64(data_type.bit_width)
            + _u64(data_type.precision)
            + _u64(data_type.scale)
        )
    if _is_binary_like(data_type):
        return _u16(TypeID.BINARY)
    if _is_string_like(data_type):
        return _u16(TypeID.UTF8)
    if _is_list_like(data_type):
        item = data_type.value_type
        if t.is_struct(item):
            raise UnsupportedTypeError(column, data_type)
        return _u16(TypeID.LIST) + data_type_bytes(item, f"{column}[]")
    raise UnsupportedTypeError(column, data_type)


def leaf_layout(data_type: pa.DataType) -> LeafLayout:
    """The memory layout of a supported, dictionary-decoded leaf type."""
    t = pa.types
    if t.is_null(data_type):
        return LeafLayout(Layout.NULL)
    if t.is_boolean(data_type):
        return LeafLayout(Layout.BOOL)
    if _is_binary_like(data_type) or _is_string_like(data_type):
        return LeafLayout(Layout.BINARY)
    if _is_list_like(data_type):
        return LeafLayout(Layout.LIST)
    if (
        t.is_integer(data_type)
        or t.is_floating(data_type)
        or t.is_temporal(data_type)
        or t.is_decimal(data_type)
    ):
        return LeafLayout(Layout.FIXED, data_type.bit_width // 8)
    raise ValueError(f"no leaf layout for {data_type}")  # callers check data_type_bytes first


def _is_binary_like(data_type: pa.DataType) -> bool:
    t = pa.types
    return bool(
        t.is_binary(data_type)
        or t.is_large_binary(data_type)
        or t.is_fixed_size_binary(data_type)
        or t.is_binary_view(data_type)
    )


def _is_string_like(data_type: pa.DataType) -> bool:
    t = pa.types
    return bool(
        t.is_string(data_type) or t.is_large_string(data_type) or t.is_string_view(data_type)
    )


def _is_list_like(data_type: pa.DataType) -> bool:
    t = pa.types
    return bool(
        t.is_list(data_type) or t.is_large_list(data_type) or t.is_fixed_size_list(data_type)
    )
