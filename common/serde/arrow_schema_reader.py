"""Read a bare Arrow ``Schema`` flatbuffer into a ``pyarrow.Schema``, checking every offset.

Works on the bytes of any Arrow writer (arrow-rs, the C++ builder behind pyarrow, ...): the
layout of tables is not assumed, only the Schema.fbs slots. Every position is checked against
the buffer, so truncated or garbage bytes raise ``DecodeError`` naming the field path
(``fields[1].children[0].type``) instead of an ``IndexError`` or a ``struct.error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from common.serde import arrow_schema_fbs as fbs
from common.serde.arrow_schema_fbs import ArrowType
from common.serde.arrow_schema_tables import Reader, Table, fail, schema_root

_MAX_DEPTH = 64
_NULL_ID = pa.null().id


def read_schema(data: bytes) -> pa.Schema:
    """Decode the Arrow ``Schema`` flatbuffer ``data`` (root table = Schema)."""
    reader, root, fields = schema_root(data)
    out = [_field(reader, f, f"fields[{i}]", 1) for i, f in enumerate(fields)]
    return _build(lambda: pa.schema(out, metadata=reader.metadata(root, 2, "custom_metadata")), "")


def _field(reader: Reader, table: Table, path: str, depth: int) -> pa.Field:
    if depth > _MAX_DEPTH:
        raise fail(f"fields are nested more than {_MAX_DEPTH} levels deep", path)
    reader.fields_left -= 1
    if reader.fields_left < 0:
        raise fail("more Field tables than the buffer can hold (shared offsets)", path)
    name = table.string(0, f"{path}.name") or ""
    nullable = bool(table.scalar(1, "bool", 0))
    dtype = _data_type(reader, table, path, depth)
    dictionary = table.table(4, f"{path}.dictionary")
    if dictionary is not None:
        dtype = _dictionary(dictionary, dtype, f"{path}.dictionary")
    metadata = reader.metadata(table, 6, f"{path}.custom_metadata")
    if dtype.id == _NULL_ID:
        nullable = True  # arrow-rs allows a non-nullable Null field, pyarrow does not
    return _build(lambda: pa.field(name, dtype, nullable, metadata), path)


def _build(make: Callable[[], Any], path: str) -> Any:
    """Run a pyarrow constructor, turning its complaints into DecodeError."""
    try:
        return make()
    except (ValueError, TypeError, OverflowError, pa.ArrowException) as e:
        raise fail(str(e).splitlines()[0] if str(e) else type(e).__name__, path) from None


# -- Field.type ---------------------------------------------------------------------------

_Children = Callable[[], list[pa.Field]]
_TypeReader = Callable[[Table, _Children, str], pa.DataType]

_SIMPLE_TYPES: dict[int, Callable[[], pa.DataType]] = {
    ArrowType.NULL: pa.null,
    ArrowType.BOOL: pa.bool_,
    ArrowType.BINARY: pa.binary,
    ArrowType.UTF8: pa.utf8,
    ArrowType.LARGE_BINARY: pa.large_binary,
    ArrowType.LARGE_UTF8: pa.large_utf8,
    ArrowType.BINARY_VIEW: pa.binary_view,
    ArrowType.UTF8_VIEW: pa.string_view,
}
_INTS = {
    (8, True): pa.int8,
    (16, True): pa.int16,
    (32, True): pa.int32,
    (64, True): pa.int64,
    (8, False): pa.uint8,
    (16, False): pa.uint16,
    (32, False): pa.uint32,
    (64, False): pa.uint64,
}
_FLOATS = {
    fbs.PRECISION_HALF: pa.float16,
    fbs.PRECISION_SINGLE: pa.float32,
    fbs.PRECISION_DOUBLE: pa.float64,
}
_TIMES = {(32, 0): "s", (32, 1): "ms", (64, 2): "us", (64, 3): "ns"}


def _data_type(r: Reader, field: Table, path: str, depth: int) -> pa.DataType:
    code = field.scalar(2, "u8", 0)
    type_path = f"{path}.type"
    table = field.table(3, type_path)
    if code == 0 or table is None:
        raise fail("the field has no type", path)
    simple = _SIMPLE_TYPES.get(code)
    if simple is not None:
        return simple()
    reader = _TYPE_READERS.get(code)
    if reader is None:
        raise fail(f"unknown Arrow type code {code}", path)

    def children() -> list[pa.Field]:
        kids = field.tables(5, f"{path}.children") or []
        return [_field(r, c, f"{path}.children[{i}]", depth + 1) for i, c in enumerate(kids)]

    return reader(table, children, type_path)


def _int_type(t: Table, path: str) -> pa.DataType:
    bit_width = t.scalar(0, "i32", 0)
    signed = bool(t.scalar(1, "bool", 0))
    make = _INTS.get((bit_width, signed))
    if make is None:
        raise fail(f"Int with bitWidth {bit_width} is not supported", path)
    return make()


def _float_type(t: Table, path: str) -> pa.DataType:
    precision = t.scalar(0, "i16", fbs.PRECISION_HALF)
    if precision not in _FLOATS:
        raise fail(f"unknown FloatingPoint precision {precision}", path)
    return _FLOATS[precision]()


def _decimal_type(t: Table, path: str) -> pa.DataType:
    precision = t.scalar(0, "i32", 0)
    scale = t.scalar(1, "i32", 0)
    bit_width = t.scalar(2, "i32", 128)
    makers = {128: pa.decimal128, 256: pa.decimal256}
    if bit_width not in makers:
        raise fail(f"Decimal with bitWidth {bit_width} is not supported", path)
    return _build(lambda: makers[bit_width](precision, scale), path)


def _date_type(t: Table, path: str) -> pa.DataType:
    unit = t.scalar(0, "i16", fbs.MILLISECOND)
    if unit == fbs.DATE_DAY:
        return pa.date32()
    if unit == fbs.MILLISECOND:
        return pa.date64()
    raise fail(f"unknown DateUnit {unit}", path)


def _time_unit(code: int, path: str) -> str:
    if not 0 <= code < len(fbs.TIME_UNITS):
        raise fail(f"unknown TimeUnit {code}", path)
    return fbs.TIME_UNITS[code]


def _time_type(t: Table, path: str) -> pa.DataType:
    unit = t.scalar(0, "i16", fbs.MILLISECOND)
    bit_width = t.scalar(1, "i32", 32)
    name = _TIMES.get((bit_width, unit))
    if name is None:
        raise fail(f"Time with bitWidth {bit_width} and unit {unit} is not supported", path)
    return pa.time32(name) if bit_width == 32 else pa.time64(name)


def _timestamp_type(t: Table, path: str) -> pa.DataType:
    unit = _time_unit(t.scalar(0, "i16", 0), path)
    tz = t.string(1, f"{path}.timezone")
    return _build(lambda: pa.timestamp(unit, tz or None), path)


def _interval_type(t: Table, path: str) -> pa.DataType:
    unit = t.scalar(0, "i16", fbs.INTERVAL_YEAR_MONTH)
    if unit != fbs.INTERVAL_MONTH_DAY_NANO:
        raise fail(f"Interval unit {unit} has no pyarrow type (only MONTH_DAY_NANO)", path)
    return pa.month_day_nano_interval()


def _fixed_size_binary_type(t: Table, path: str) -> pa.DataType:
    width = t.scalar(0, "i32", 0)
    if width < 0:
        raise fail(f"FixedSizeBinary has a negative byteWidth {width}", path)
    return pa.binary(width)


def _only_child(children: _Children, path: str) -> pa.Field:
    kids = children()
    if len(kids) != 1:
        raise fail(f"expected exactly one child field, found {len(kids)}", path)
    return kids[0]


def _fixed_size_list_type(t: Table, children: _Children, path: str) -> pa.DataType:
    size = t.scalar(0, "i32", 0)
    if size < 0:
        raise fail(f"FixedSizeList has a negative listSize {size}", path)
    child = _only_child(children, path)
    return _build(lambda: pa.list_(child, size), path)


def _map_type(t: Table, children: _Children, path: str) -> pa.DataType:
    keys_sorted = bool(t.scalar(0, "bool", 0))
    entries = _only_child(children, path)
    if entries.type.id != pa.struct([]).id or entries.type.num_fields != 2:
        raise fail("a Map's child must be a struct of a key and a value", path)
    key, item = entries.type.field(0), entries.type.field(1)
    return _build(lambda: pa.map_(key, item, keys_sorted=keys_sorted), path)


def _union_type(t: Table, children: _Children, path: str) -> pa.DataType:
    mode = t.scalar(0, "i16", fbs.UNION_SPARSE)
    if mode not in (fbs.UNION_SPARSE, fbs.UNION_DENSE):
        raise fail(f"unknown UnionMode {mode}", path)
    kids = children()
    type_ids = t.ints(1, f"{path}.typeIds")
    codes = list(range(len(kids))) if type_ids is None else type_ids
    if len(codes) != len(kids):
        raise fail(f"{len(codes)} typeIds for {len(kids)} children", path)
    mode_name = "dense" if mode == fbs.UNION_DENSE else "sparse"
    return _build(lambda: pa.union(kids, mode_name, codes), path)


def _run_end_encoded_type(t: Table, children: _Children, path: str) -> pa.DataType:
    kids = children()
    if len(kids) != 2:
        raise fail(f"RunEndEncoded needs two children, found {len(kids)}", path)
    return _build(lambda: pa.run_end_encoded(kids[0].type, kids[1].type), path)


def _leaf(read: Callable[[Table, str], pa.DataType]) -> _TypeReader:
    return lambda t, children, path: read(t, path)


def _nested(make: Callable[[pa.Field], pa.DataType]) -> _TypeReader:
    return lambda t, children, path: _build(lambda: make(_only_child(children, path)), path)


_TYPE_READERS: dict[int, _TypeReader] = {
    ArrowType.INT: _leaf(_int_type),
    ArrowType.FLOATING_POINT: _leaf(_float_type),
    ArrowType.DECIMAL: _leaf(_decimal_type),
    ArrowType.DATE: _leaf(_date_type),
    ArrowType.TIME: _leaf(_time_type),
    ArrowType.TIMESTAMP: _leaf(_timestamp_type),
    ArrowType.INTERVAL: _leaf(_interval_type),
    ArrowType.DURATION: _leaf(
        lambda t, path: pa.duration(_time_unit(t.scalar(0, "i16", fbs.MILLISECOND), path))
    ),
    ArrowType.FIXED_SIZE_BINARY: _leaf(_fixed_size_binary_type),
    ArrowType.LIST: _nested(pa.list_),
    ArrowType.LARGE_LIST: _nested(pa.large_list),
    ArrowType.LIST_VIEW: _nested(pa.list_view),
    ArrowType.LARGE_LIST_VIEW: _nested(pa.large_list_view),
    ArrowType.FIXED_SIZE_LIST: _fixed_size_list_type,
    ArrowType.STRUCT: lambda t, children, path: _build(lambda: pa.struct(children()), path),
    ArrowType.MAP: _map_type,
    ArrowType.UNION: _union_type,
    ArrowType.RUN_END_ENCODED: _run_end_encoded_type,
}


def _dictionary(encoding: Table, value_type: pa.DataType, path: str) -> pa.DataType:
    index = encoding.table(1, f"{path}.indexType")
    if index is None:
        raise fail("a DictionaryEncoding has no indexType", path)
    index_type = _int_type(index, f"{path}.indexType")
    ordered = bool(encoding.scalar(2, "bool", 0))
    return _build(lambda: pa.dictionary(index_type, value_type, ordered), path)
