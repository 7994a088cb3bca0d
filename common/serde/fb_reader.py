"""Read model objects out of FlatBuffers bytes, checking every offset against the buffer.

Malformed input (offsets or lengths pointing outside the buffer, unknown union codes or enum
values, missing required fields, invalid UTF-8, bad multihashes) raises ``DecodeError`` whose
path names the field where decoding failed, e.g. ``event.new_data.logical_hash``.
"""

from __future__ import annotations

import struct
from typing import Any

from common.odf.errors import DecodeError
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.serde.fb_plan import FieldPlan, Kind, TablePlan, plan_of
from common.serde.timestamp import SIZE as TIMESTAMP_SIZE
from common.serde.timestamp import decode_timestamp

_U8 = struct.Struct("<B").unpack_from
_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_I64 = struct.Struct("<q").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_VT_HEADER = struct.Struct("<HH").unpack_from

_INLINE_SIZE = {
    Kind.U64: 8,
    Kind.I32: 4,
    Kind.ENUM: 4,
    Kind.BOOL: 1,
    Kind.TIMESTAMP: TIMESTAMP_SIZE,
}


class Budget:
    """How many more objects one decode may produce.

    A FlatBuffer can point many offsets at one subtree; nested vectors of such offsets would
    make a small buffer decode into a huge object graph. Writers of ODF buffers never share
    objects (only vtables), so a buffer of n bytes holds fewer than n / 4 objects; the budget
    allows n, leaving room for writers that share strings.
    """

    __slots__ = ("remaining",)

    def __init__(self, buf_len: int) -> None:
        self.remaining = buf_len + 16

    def spend(self, count: int) -> None:
        self.remaining -= count
        if self.remaining < 0:
            raise DecodeError(
                "buffer references far more objects than it can hold (shared subtrees)"
            )


class Table:
    """A located table: its position, its vtable and the bounds of its inline data."""

    __slots__ = ("budget", "buf", "name", "obj_size", "pos", "vt", "vt_len")

    def __init__(self, buf: bytes, pos: int, name: str, budget: Budget | None = None) -> None:
        n = len(buf)
        self.budget = budget if budget is not None else Budget(n)
        self.budget.spend(1)
        if pos < 0 or pos + 4 > n:
            raise DecodeError(f"{name} table at byte {pos} lies outside the {n}-byte buffer")
        vt = pos - _I32(buf, pos)[0]
        if vt < 0 or vt + 4 > n:
            raise DecodeError(f"{name} vtable at byte {vt} lies outside the {n}-byte buffer")
        vt_len, obj_size = _VT_HEADER(buf, vt)
        if vt_len < 4 or vt_len % 2 or vt + vt_len > n:
            raise DecodeError(f"{name} vtable at byte {vt} has an invalid length {vt_len}")
        if obj_size < 4 or pos + obj_size > n:
            raise DecodeError(f"{name} table at byte {pos} has an invalid size {obj_size}")
        self.buf = buf
        self.name = name
        self.pos = pos
        self.vt = vt
        self.vt_len = vt_len
        self.obj_size = obj_size

    def field(self, voffset: int, size: int) -> int:
        """Absolute position of the field at ``voffset`` (0 when absent)."""
        if voffset + 2 > self.vt_len:
            return 0
        off: int = _U16(self.buf, self.vt + voffset)[0]
        if off == 0:
            return 0
        if off < 4 or off + size > self.obj_size:
            raise DecodeError(
                f"field at offset {off} (+{size} bytes) lies outside the "
                f"{self.obj_size}-byte {self.name} table"
            )
        return self.pos + off

    def deref(self, voffset: int) -> int:
        """Position of the object referenced by the offset field at ``voffset`` (0 if absent)."""
        at = self.field(voffset, 4)
        if at == 0:
            return 0
        target: int = at + _U32(self.buf, at)[0]
        if target >= len(self.buf):
            raise DecodeError(
                f"offset at byte {at} points to byte {target}, outside the "
                f"{len(self.buf)}-byte buffer"
            )
        return target


def read_root(buf: bytes, cls: type) -> Any:
    """Decode the root table of a finished buffer as an instance of ``cls``."""
    if len(buf) < 12:
        raise DecodeError(f"a {cls.__name__} buffer needs at least 12 bytes, got {len(buf)}")
    return read_table(buf, _U32(buf, 0)[0], plan_of(cls), Budget(len(buf)))


def read_table(buf: bytes, pos: int, plan: TablePlan, budget: Budget) -> Any:
    table = Table(buf, pos, plan.name, budget)
    values: dict[str, Any] = {}
    for f in plan.fields:
        try:
            values[f.name] = _read_field(table, f)
        except DecodeError as e:
            raise e.at(f.name) from None
    return plan.cls(**values)


def _read_field(table: Table, f: FieldPlan) -> Any:
    kind = f.kind
    if kind is Kind.UNION:
        return _read_union(table, f.voffset, f)
    size = _INLINE_SIZE.get(kind)
    if size is not None:
        at = table.field(f.voffset, size)
        if at == 0:
            return None if f.optional else _default(f)
        return _read_scalar(table.buf, at, f)
    target = table.deref(f.voffset)
    if target == 0:
        if f.optional:
            return None
        raise DecodeError("required field is missing")
    return _read_out_of_line(table, target, f)


def _default(f: FieldPlan) -> Any:
    kind = f.kind
    if kind is Kind.ENUM:
        return f.enum_members[0]
    if kind is Kind.BOOL:
        return False
    if kind is Kind.TIMESTAMP:
        raise DecodeError("required field is missing")
    return 0


def _read_scalar(buf: bytes, at: int, f: FieldPlan) -> Any:
    kind = f.kind
    if kind is Kind.U64:
        return _U64(buf, at)[0]
    if kind is Kind.I32:
        return _I32(buf, at)[0]
    if kind is Kind.BOOL:
        raw = _U8(buf, at)[0]
        if raw > 1:
            raise DecodeError(f"bool byte is {raw}, expected 0 or 1")
        return raw == 1
    if kind is Kind.ENUM:
        code = _I32(buf, at)[0]
        members = f.enum_members
        if not 0 <= code < len(members):
            name = f.target.__name__ if f.target else "enum"
            raise DecodeError(f"unknown {name} value {code}")
        return members[code]
    return decode_timestamp(buf, at)


def _read_union(table: Table, voffset: int, f: FieldPlan) -> Any:
    """A union stored at slots ``voffset`` (type byte) and ``voffset + 2`` (value)."""
    at = table.field(voffset, 1)
    code = _U8(table.buf, at)[0] if at else 0
    if code == 0:
        if f.optional:
            return None
        raise DecodeError(f"required {f.union} union is missing")
    variants = f.variants
    if code > len(variants):
        raise DecodeError(f"unknown {f.union} type code {code}")
    target = table.deref(voffset + 2)
    if target == 0:
        raise DecodeError(f"{f.union} union has type code {code} but no value")
    return read_table(table.buf, target, plan_of(variants[code - 1]), table.budget)


def _read_out_of_line(parent: Table, target: int, f: FieldPlan) -> Any:
    buf = parent.buf
    kind = f.kind
    if kind is Kind.STRING:
        return read_string(buf, target)
    if kind is Kind.BYTES:
        return read_bytes(buf, target)
    if kind is Kind.MULTIHASH:
        return Multihash.from_bytes(read_bytes(buf, target))
    if kind is Kind.DATASET_ID:
        return DatasetID.from_bytes(read_bytes(buf, target))
    if kind is Kind.TABLE:
        assert f.target is not None
        return read_table(buf, target, plan_of(f.target), parent.budget)
    elements = _vector_elements(buf, target)
    parent.budget.spend(len(elements))
    items: list[Any] = []
    for i, at in enumerate(elements):
        try:
            items.append(_read_element(parent, at, f))
        except DecodeError as e:
            raise e.at(f"[{i}]") from None
    return tuple(items)


def _read_element(parent: Table, at: int, f: FieldPlan) -> Any:
    buf = parent.buf
    kind = f.kind
    if kind is Kind.STRING_VEC:
        return read_string(buf, at)
    if kind is Kind.TABLE_VEC:
        assert f.target is not None
        return read_table(buf, at, plan_of(f.target), parent.budget)
    wrapper = Table(buf, at, f"{f.union}Wrapper", parent.budget)
    return _read_union(wrapper, 4, _WRAPPED[f.union] if f.union else f)


def _vector_elements(buf: bytes, target: int) -> list[int]:
    """Positions of the objects referenced by a vector of offsets at ``target``."""
    count = _vector_length(buf, target, 4)
    out = []
    for i in range(count):
        at = target + 4 + 4 * i
        ref = at + _U32(buf, at)[0]
        if ref >= len(buf):
            raise DecodeError(
                f"vector element {i} points to byte {ref}, outside the {len(buf)}-byte buffer"
            )
        out.append(ref)
    return out


def _vector_length(buf: bytes, target: int, elem_size: int, extra: int = 0) -> int:
    n = len(buf)
    if target + 4 > n:
        raise DecodeError(f"vector at byte {target} lies outside the {n}-byte buffer")
    count: int = _U32(buf, target)[0]
    if target + 4 + count * elem_size + extra > n:
        raise DecodeError(
            f"vector of {count} elements at byte {target} runs past the end of the {n}-byte buffer"
        )
    return count


def read_bytes(buf: bytes, target: int) -> bytes:
    length = _vector_length(buf, target, 1)
    return buf[target + 4 : target + 4 + length]


def read_string(buf: bytes, target: int) -> str:
    length = _vector_length(buf, target, 1, extra=1)
    end = target + 4 + length
    if buf[end] != 0:
        raise DecodeError(f"string at byte {target} is not zero-terminated")
    try:
        return buf[target + 4 : end].decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"string at byte {target} is not valid UTF-8: {e.reason}") from None


class _WrappedUnion(dict[str, FieldPlan]):
    """The ``value`` field plan of each ``XWrapper`` table, built on first use."""

    def __missing__(self, union: str) -> FieldPlan:
        fp = FieldPlan("value", 0, Kind.UNION, False, union=union)
        self[union] = fp
        return fp


_WRAPPED = _WrappedUnion()
