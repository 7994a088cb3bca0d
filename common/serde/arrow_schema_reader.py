"""Read a bare Arrow ``Schema`` flatbuffer into a ``pyarrow.Schema``, checking every offset.

Works on the bytes of any Arrow writer (arrow-rs, the C++ builder behind pyarrow, ...): the
layout of tables is not assumed, only the Schema.fbs slots. Every position is checked against
the buffer, so truncated or garbage bytes raise ``DecodeError`` naming the field path
(``fields[1].children[0].type``) instead of an ``IndexError`` or a ``struct.error``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from common.odf.errors import DecodeError
from common.serde.arrow_schema_fbs import (
    DATE_DAY,
    INTERVAL_MONTH_DAY_NANO,
    INTERVAL_YEAR_MONTH,
    MILLISECOND,
    PRECISION_DOUBLE,
    PRECISION_HALF,
    PRECISION_SINGLE,
    TIME_UNITS,
    UNION_DENSE,
    UNION_SPARSE,
    ArrowType,
)

_MAX_DEPTH = 64
_NULL_ID = pa.null().id
_IPC_CONTINUATION = b"\xff\xff\xff\xff"

_SCALARS = {
    "bool": struct.Struct("<?"),
    "u8": struct.Struct("<B"),
    "i16": struct.Struct("<h"),
    "u16": struct.Struct("<H"),
    "i32": struct.Struct("<i"),
    "u32": struct.Struct("<I"),
    "i64": struct.Struct("<q"),
}


def read_schema(data: bytes) -> pa.Schema:
    """Decode the Arrow ``Schema`` flatbuffer ``data`` (root table = Schema)."""
    if data[:4] == _IPC_CONTINUATION:
        raise DecodeError(
            "invalid Arrow schema flatbuffer: it starts with the IPC continuation marker "
            "0xFFFFFFFF (an IPC stream message); expected a bare Schema flatbuffer"
        )
    if len(data) < 8:
        raise DecodeError(f"invalid Arrow schema flatbuffer: only {len(data)} bytes")
    reader = _Reader(data)
    root = reader.table(reader.uoffset(0, ""), "")
    fields = root.tables(1, "fields")
    if fields is None:
        raise DecodeError("invalid Arrow schema flatbuffer: the Schema has no fields vector")
    out = [reader.field(f, f"fields[{i}]", 1) for i, f in enumerate(fields)]
    return _build(lambda: pa.schema(out, metadata=reader.metadata(root, 2, "custom_metadata")), "")


def _fail(what: str, path: str) -> DecodeError:
    return DecodeError(f"invalid Arrow schema flatbuffer: {what}", path=path or None)


class _Reader:
    """Bounds-checked access to one buffer, with a budget against shared/overlapping tables."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        # A well-formed buffer holds every Field table once, and a Field takes >= 12 bytes.
        self.fields_left = self.size // 12 + 1

    def scalar(self, kind: str, pos: int, path: str) -> int:
        fmt = _SCALARS[kind]
        if pos < 0 or pos + fmt.size > self.size:
            raise _fail(f"{kind} at byte {pos} lies outside the {self.size}-byte buffer", path)
        return int(fmt.unpack_from(self.data, pos)[0])

    def uoffset(self, pos: int, path: str) -> int:
        """The position an unsigned offset stored at ``pos`` points to."""
        off = self.scalar("u32", pos, path)
        target = pos + off
        if off == 0 or target >= self.size:
            raise _fail(
                f"offset at byte {pos} points to byte {target}, outside the "
                f"{self.size}-byte buffer",
                path,
            )
        return target

    def table(self, pos: int, path: str) -> _Table:
        return _Table(self, pos, path)

    def string(self, pos: int, path: str) -> str:
        length = self.scalar("u32", pos, path)
        start = pos + 4
        if start + length >= self.size or self.data[start + length] != 0:
            raise _fail(f"a {length}-byte string at byte {pos} has no terminator", path)
        try:
            return self.data[start : start + length].decode()
        except UnicodeDecodeError:
            raise _fail(f"string at byte {pos} is not valid UTF-8", path) from None

    def vector(self, pos: int, elem_size: int, path: str) -> list[int]:
        """Positions of the elements of the vector at ``pos``."""
        count = self.scalar("u32", pos, path)
        start = pos + 4
        if start + count * elem_size > self.size:
            raise _fail(f"a {count}-element vector at byte {pos} runs past the buffer end", path)
        return [start + i * elem_size for i in range(count)]

    def field(self, table: _Table, path: str, depth: int) -> pa.Field:
        if depth > _MAX_DEPTH:
            raise _fail(f"fields are nested more than {_MAX_DEPTH} levels deep", path)
        self.fields_left -= 1
        if self.fields_left < 0:
            raise _fail("more Field tables than the buffer can hold (shared offsets)", path)
        name = table.string(0, f"{path}.name") or ""
        nullable = bool(table.scalar(1, "bool", 0))
        dtype = _data_type(self, table, path, depth)
        dictionary = table.table(4, f"{path}.dictionary")
        if dictionary is not None:
            dtype = _dictionary(dictionary, dtype, f"{path}.dictionary")
        metadata = self.metadata(table, 6, f"{path}.custom_metadata")
        if dtype.id == _NULL_ID:
            nullable = True  # arrow-rs allows a non-nullable Null field, pyarrow does not
        return _build(lambda: pa.field(name, dtype, nullable, metadata), path)

    def metadata(self, table: _Table, slot: int, path: str) -> dict[bytes, bytes] | None:
        """Custom metadata; entries without a key or a value are skipped, like arrow-rs."""
        entries = table.tables(slot, path)
        if not entries:
            return None
        out: dict[bytes, bytes] = {}
        for i, kv in enumerate(entries):
            key = kv.string(0, f"{path}[{i}].key")
            value = kv.string(1, f"{path}[{i}].value")
            if key is not None and value is not None:
                out[key.encode()] = value.encode()
        return out or None


class _Table:
    """A table located in the buffer: its vtable and inline size are checked on creation."""

    def __init__(self, reader: _Reader, pos: int, path: str) -> None:
        self.r = reader
        self.pos = pos
        self.path = path
        vt = pos - reader.scalar("i32", pos, path)
        self.vt = vt
        self.vt_len = reader.scalar("u16", vt, path)
        self.obj_size = reader.scalar("u16", vt + 2, path)
        if self.vt_len < 4 or self.vt_len % 2 or vt + self.vt_len > reader.size:
            raise _fail(f"vtable at byte {vt} has an invalid length {self.vt_len}", path)
        if self.obj_size < 4 or pos + self.obj_size > reader.size:
            raise _fail(f"table at byte {pos} has an invalid size {self.obj_size}", path)

    def _slot(self, slot: int, size: int) -> int | None:
        voffset = 4 + 2 * slot
        if voffset + 2 > self.vt_len:
            return None
        off = self.r.scalar("u16", self.vt + voffset, self.path)
        if off == 0:
            return None
        if off < 4 or off + size > self.obj_size:
            raise _fail(f"slot {slot} lies outside its {self.obj_size}-byte table", self.path)
        return self.pos + off

    def scalar(self, slot: int, kind: str, default: int) -> int:
        pos = self._slot(slot, _SCALARS[kind].size)
        return default if pos is None else self.r.scalar(kind, pos, self.path)

    def _ref(self, slot: int, path: str) -> int | None:
        pos = self._slot(slot, 4)
        return None if pos is None else self.r.uoffset(pos, path)

    def string(self, slot: int, path: str) -> str | None:
        target = self._ref(slot, path)
        return None if target is None else self.r.string(target, path)

    def table(self, slot: int, path: str) -> _Table | None:
        target = self._ref(slot, path)
        return None if target is None else _Table(self.r, target, path)

    def tables(self, slot: int, path: str) -> list[_Table] | None:
        target = self._ref(slot, path)
        if target is None:
            return None
        elements = self.r.vector(target, 4, path)
        return [
            _Table(self.r, self.r.uoffset(at, f"{path}[{i}]"), f"{path}[{i}]")
            for i, at in enumerate(elements)
        ]

    def ints(self, slot: int, path: str) -> list[int] | None:
        target = self._ref(slot, path)
        if target is None:
            return None
        return [self.r.scalar("i32", at, path) for at in self.r.vector(target, 4, path)]


def _build(make: Callable[[], Any], path: str) -> Any:
    """Run a pyarrow constructor, turning its complaints into DecodeError."""
    try:
        return make()
    except (ValueError, TypeError, OverflowError, pa.ArrowException) as e:
        raise _fail(str(e).splitlines()[0] if str(e) else type(e).__name__, path) from None


# -- Field.type ---------------------------------------------------------------------------

_Children = Callable[[], list[pa.Field]]
_TypeReader = Callable[[_Table, _Children, str], pa.DataType]

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
_FLOATS = {PRECISION_HALF: pa.float16, PRECISION_SINGLE: pa.float32, PRECISION_DOUBLE: pa.float64}
_TIMES = {(32, 0): "s", (32, 1): "ms", (64, 2): "us", (64, 3): "ns"}


def _data_type(r: _Reader, field: _Table, path: str, depth: int) -> pa.DataType:
    code = field.scalar(2, "u8", 0)
    type_path = f"{path}.type"
    table = field.table(3, type_path)
    if code == 0 or table is None:
        raise _fail("the field has no type", path)
    simple = _SIMPLE_TYPES.get(code)
    if simple is not None:
        return simple()
    reader = _TYPE_READERS.get(code)
    if reader is None:
        raise _fail(f"unknown Arrow type code {code}", path)

    def children() -> list[pa.Field]:
        kids = field.tables(5, f"{path}.children") or []
        return [r.field(c, f"{path}.children[{i}]", depth + 1) for i, c in enumerate(kids)]

    return reader(table, children, type_path)


def _int_type(t: _Table, path: str) -> pa.DataType:
    bit_width = t.scalar(0, "i32", 0)
    signed = bool(t.scalar(1, "bool", 0))
    make = _INTS.get((bit_width, signed))
    if make is None:
        raise _fail(f"Int with bitWidth {bit_width} is not supported", path)
    return make()


def _float_type(t: _Table, path: str) -> pa.DataType:
    precision = t.scalar(0, "i16", PRECISION_HALF)
    if precision not in _FLOATS:
        raise _fail(f"unknown FloatingPoint precision {precision}", path)
    return _FLOATS[precision]()


def _decimal_type(t: _Table, path: str) -> pa.DataType:
    precision = t.scalar(0, "i32", 0)
    scale = t.scalar(1, "i32", 0)
    bit_width = t.scalar(2, "i32", 128)
    makers = {128: pa.decimal128, 256: pa.decimal256}
    if bit_width not in makers:
        raise _fail(f"Decimal with bitWidth {bit_width} is not supported", path)
    return _build(lambda: makers[bit_width](precision, scale), path)


def _date_type(t: _Table, path: str) -> pa.DataType:
    unit = t.scalar(0, "i16", MILLISECOND)
    if unit == DATE_DAY:
        return pa.date32()
    if unit == MILLISECOND:
        return pa.date64()
    raise _fail(f"unknown DateUnit {unit}", path)


def _time_unit(code: int, path: str) -> str:
    if not 0 <= code < len(TIME_UNITS):
        raise _fail(f"unknown TimeUnit {code}", path)
    return TIME_UNITS[code]


def _time_type(t: _Table, path: str) -> pa.DataType:
    unit = t.scalar(0, "i16", MILLISECOND)
    bit_width = t.scalar(1, "i32", 32)
    name = _TIMES.get((bit_width, unit))
    if name is None:
        raise _fail(f"Time with bitWidth {bit_width} and unit {unit} is not supported", path)
    return pa.time32(name) if bit_width == 32 else pa.time64(name)


def _timestamp_type(t: _Table, path: str) -> pa.DataType:
    unit = _time_unit(t.scalar(0, "i16", 0), path)
    tz = t.string(1, f"{path}.timezone")
    return _build(lambda: pa.timestamp(unit, tz or None), path)


def _interval_type(t: _Table, path: str) -> pa.DataType:
    unit = t.scalar(0, "i16", INTERVAL_YEAR_MONTH)
    if unit != INTERVAL_MONTH_DAY_NANO:
        raise _fail(f"Interval unit {unit} has no pyarrow type (only MONTH_DAY_NANO)", path)
    return pa.month_day_nano_interval()


def _fixed_size_binary_type(t: _Table, path: str) -> pa.DataType:
    width = t.scalar(0, "i32", 0)
    if width < 0:
        raise _fail(f"FixedSizeBinary has a negative byteWidth {width}", path)
    return pa.binary(width)


def _only_child(children: _Children, path: str) -> pa.Field:
    kids = children()
    if len(kids) != 1:
        raise _fail(f"expected exactly one child field, found {len(kids)}", path)
    return kids[0]


def _fixed_size_list_type(t: _Table, children: _Children, path: str) -> pa.DataType:
    size = t.scalar(0, "i32", 0)
    if size < 0:
        raise _fail(f"FixedSizeList has a negative listSize {size}", path)
    child = _only_child(children, path)
    return _build(lambda: pa.list_(child, size), path)


def _map_type(t: _Table, children: _Children, path: str) -> pa.DataType:
    keys_sorted = bool(t.scalar(0, "bool", 0))
    entries = _only_child(children, path)
    if entries.type.id != pa.struct([]).id or entries.type.num_fields != 2:
        raise _fail("a Map's child must be a struct of a key and a value", path)
    key, item = entries.type.field(0), entries.type.field(1)
    return _build(lambda: pa.map_(key, item, keys_sorted=keys_sorted), path)


def _union_type(t: _Table, children: _Children, path: str) -> pa.DataType:
    mode = t.scalar(0, "i16", UNION_SPARSE)
    if mode not in (UNION_SPARSE, UNION_DENSE):
        raise _fail(f"unknown UnionMode {mode}", path)
    kids = children()
    type_ids = t.ints(1, f"{path}.typeIds")
    codes = list(range(len(kids))) if type_ids is None else type_ids
    if len(codes) != len(kids):
        raise _fail(f"{len(codes)} typeIds for {len(kids)} children", path)
    mode_name = "dense" if mode == UNION_DENSE else "sparse"
    return _build(lambda: pa.union(kids, mode_name, codes), path)


def _run_end_encoded_type(t: _Table, children: _Children, path: str) -> pa.DataType:
    kids = children()
    if len(kids) != 2:
        raise _fail(f"RunEndEncoded needs two children, found {len(kids)}", path)
    return _build(lambda: pa.run_end_encoded(kids[0].type, kids[1].type), path)


def _leaf(read: Callable[[_Table, str], pa.DataType]) -> _TypeReader:
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
        lambda t, path: pa.duration(_time_unit(t.scalar(0, "i16", MILLISECOND), path))
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


def _dictionary(encoding: _Table, value_type: pa.DataType, path: str) -> pa.DataType:
    index = encoding.table(1, f"{path}.indexType")
    if index is None:
        raise _fail("a DictionaryEncoding has no indexType", path)
    index_type = _int_type(index, f"{path}.indexType")
    ordered = bool(encoding.scalar(2, "bool", 0))
    return _build(lambda: pa.dictionary(index_type, value_type, ordered), path)
