"""Serialize model objects into FlatBuffers, in exactly the reference builder's call order.

For every table (kamu's ``convertors_generated.rs`` order, see the serialization guide §3):

1. phase 1: create the out-of-line objects of the present fields (strings, byte vectors,
   vectors, child tables, union values) depth-first, in field order;
2. phase 2: start the table and add every present field in field order (a union adds its
   type byte, then its value offset), then end the table.

Presence: optional fields are written whenever they are not ``None`` (optional scalars too,
even when 0 or the first enum member); required ``uint64``/``int32`` scalars and required
enums are omitted when they are 0; required out-of-line fields are always written.

The ``Timestamp`` struct is pushed with alignment 1 (manifest version 2, what ODF 0.35 era
writers produce) or 4 (manifest version 3); see ``fbs/README.md``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import flatbuffers

from common.odf import unions
from common.odf.errors import ValidationError
from common.serde.fb_plan import OUT_OF_LINE, FieldPlan, Kind, plan_of
from common.serde.timestamp import SIZE as TIMESTAMP_SIZE
from common.serde.timestamp import encode_timestamp

U64_MAX = (1 << 64) - 1
I32_MIN = -(1 << 31)
I32_MAX = (1 << 31) - 1


def new_builder(size_hint: int = 1024) -> flatbuffers.Builder:
    return flatbuffers.Builder(size_hint)


def finish(builder: flatbuffers.Builder, root: int) -> bytes:
    """Finish with no file identifier and no size prefix; return the buffer's bytes."""
    builder.Finish(root)
    return bytes(builder.Output())


def write_table(builder: flatbuffers.Builder, obj: Any, ts_align: int) -> int:
    """Serialize dataclass ``obj`` as a table; returns its offset."""
    plan = plan_of(type(obj))
    offsets: list[int] = [0] * len(plan.fields)
    for i, f in enumerate(plan.fields):
        if f.kind in OUT_OF_LINE:
            value = getattr(obj, f.name)
            if value is None:
                if not f.optional:
                    raise ValidationError("required field is missing", path=f.name)
                continue
            try:
                offsets[i] = _create(builder, f, value, ts_align)
            except ValidationError as e:
                raise e.at(f.name) from None
            except (TypeError, AttributeError, ValueError, struct.error) as e:
                raise _bad_value(f, value, e) from None
    builder.StartObject(plan.num_slots)
    for i, f in enumerate(plan.fields):
        value = getattr(obj, f.name)
        if value is None:
            if not f.optional:
                raise ValidationError("required field is missing", path=f.name)
            continue
        try:
            _add(builder, f, value, offsets[i], ts_align)
        except ValidationError as e:
            raise e.at(f.name) from None
        except (TypeError, AttributeError, ValueError, struct.error) as e:
            raise _bad_value(f, value, e) from None
    return int(builder.EndObject())


def _bad_value(f: FieldPlan, value: Any, e: Exception) -> ValidationError:
    return ValidationError(
        f"cannot encode {type(value).__name__} as {f.kind.name.lower()}: {e}", path=f.name
    )


def _create(builder: flatbuffers.Builder, f: FieldPlan, value: Any, ts_align: int) -> int:
    """Phase 1: the out-of-line object of one present field; returns its offset."""
    kind = f.kind
    if kind is Kind.STRING:
        return int(builder.CreateString(_check_str(value)))
    if kind is Kind.MULTIHASH or kind is Kind.DATASET_ID:
        return int(builder.CreateByteVector(value.to_bytes()))
    if kind is Kind.BYTES:
        return int(builder.CreateByteVector(bytes(value)))
    if kind is Kind.TABLE:
        _check_type(value, f.target)
        return write_table(builder, value, ts_align)
    if kind is Kind.UNION:
        _variant_code(f, value)
        return write_table(builder, value, ts_align)
    if kind is Kind.STRING_VEC:
        elems = [builder.CreateString(_check_str(s)) for s in _check_seq(value)]
        return _offset_vector(builder, elems)
    if kind is Kind.TABLE_VEC:
        elems = []
        for i, item in enumerate(_check_seq(value)):
            try:
                _check_type(item, f.target)
                elems.append(write_table(builder, item, ts_align))
            except ValidationError as e:
                raise e.at(f"[{i}]") from None
        return _offset_vector(builder, elems)
    if kind is Kind.UNION_VEC:
        elems = []
        for i, item in enumerate(_check_seq(value)):
            try:
                elems.append(_write_wrapper(builder, f, item, ts_align))
            except ValidationError as e:
                raise e.at(f"[{i}]") from None
        return _offset_vector(builder, elems)
    raise AssertionError(f"{kind} is not an out-of-line kind")


def _add(
    builder: flatbuffers.Builder, f: FieldPlan, value: Any, offset: int, ts_align: int
) -> None:
    """Phase 2: add one present field to the table under construction."""
    kind = f.kind
    slot = f.slot
    if kind is Kind.UNION:
        builder.PrependUint8Slot(slot, _variant_code(f, value), 0)
        builder.PrependUOffsetTRelativeSlot(slot + 1, offset, 0)
    elif kind in OUT_OF_LINE:
        builder.PrependUOffsetTRelativeSlot(slot, offset, 0)
    elif kind is Kind.U64:
        if not isinstance(value, int) or not 0 <= value <= U64_MAX:
            raise ValidationError(f"{value!r} is not a uint64")
        if value or f.optional:
            builder.PrependUint64(value)
            builder.Slot(slot)
    elif kind is Kind.I32:
        if not isinstance(value, int) or not I32_MIN <= value <= I32_MAX:
            raise ValidationError(f"{value!r} is not an int32")
        if value or f.optional:
            builder.PrependInt32(value)
            builder.Slot(slot)
    elif kind is Kind.ENUM:
        code = _enum_code(f, value)
        if code or f.optional:
            builder.PrependInt32(code)
            builder.Slot(slot)
    elif kind is Kind.BOOL:
        if not isinstance(value, bool):
            raise ValidationError(f"{value!r} is not a bool")
        if value or f.optional:
            builder.PrependBool(value)
            builder.Slot(slot)
    elif kind is Kind.TIMESTAMP:
        push_timestamp(builder, encode_timestamp(value), ts_align)
        builder.Slot(slot)
    else:
        raise AssertionError(f"unhandled field kind {kind}")


def push_timestamp(builder: flatbuffers.Builder, data: bytes, ts_align: int) -> None:
    """Push the 16 Timestamp struct bytes with alignment ``ts_align`` (1 or 4)."""
    builder.Prep(ts_align, TIMESTAMP_SIZE)
    head = builder.head - TIMESTAMP_SIZE
    builder.head = head
    builder.Bytes[head : head + TIMESTAMP_SIZE] = data


def _write_wrapper(builder: flatbuffers.Builder, f: FieldPlan, value: Any, ts_align: int) -> int:
    """One ``XWrapper { value: X; }`` table of a vector of unions."""
    code = _variant_code(f, value)
    inner = write_table(builder, value, ts_align)
    builder.StartObject(2)
    builder.PrependUint8Slot(0, code, 0)
    builder.PrependUOffsetTRelativeSlot(1, inner, 0)
    return int(builder.EndObject())


def _offset_vector(builder: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return int(builder.EndVector())


def _variant_code(f: FieldPlan, value: Any) -> int:
    variants = f.variants
    if type(value) not in variants:
        names = ", ".join(v.__name__ for v in variants)
        raise ValidationError(f"{type(value).__name__} is not a variant of {f.union} ({names})")
    return unions.code_of(type(value))


def _enum_code(f: FieldPlan, value: Any) -> int:
    members = f.enum_members
    try:
        return members.index(value)
    except ValueError:
        raise ValidationError(
            f"{value!r} is not a member of {f.target.__name__ if f.target else '?'}"
        ) from None


def _check_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"expected a string, got {type(value).__name__}")
    return value


def _check_seq(value: Any) -> Sequence[Any]:
    if not isinstance(value, tuple | list):
        raise ValidationError(f"expected a tuple, got {type(value).__name__}")
    return value


def _check_type(value: Any, target: type | None) -> None:
    if target is not None and type(value) is not target:
        raise ValidationError(f"expected {target.__name__}, got {type(value).__name__}")
