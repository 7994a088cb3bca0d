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

import operator
import struct
from collections.abc import Callable, Sequence
from typing import Any

import flatbuffers

from common.odf.errors import ValidationError
from common.serde.fb_builder import FastBuilder
from common.serde.fb_plan import OUT_OF_LINE, FieldPlan, Kind, plan_of
from common.serde.timestamp import SIZE as TIMESTAMP_SIZE
from common.serde.timestamp import encode_timestamp

U64_MAX = (1 << 64) - 1
I32_MIN = -(1 << 31)
I32_MAX = (1 << 31) - 1


Builder = FastBuilder
"""The builder type the writer drives. ``flatbuffers.Builder`` works too (same API subset,
same bytes); tests use it as the reference."""


def new_builder(size_hint: int = 1024) -> Builder:
    return FastBuilder(size_hint)


def new_reference_builder(size_hint: int = 1024) -> Builder:
    """The PyPI ``flatbuffers`` builder (>= 25.12.19), for differential testing."""
    builder: Builder = flatbuffers.Builder(size_hint)
    return builder


def finish(builder: Builder, root: int) -> bytes:
    """Finish with no file identifier and no size prefix; return the buffer's bytes."""
    builder.Finish(root)
    return bytes(builder.Output())


def write_table(builder: Builder, obj: Any, ts_align: int) -> int:
    """Serialize dataclass ``obj`` as a table; returns its offset."""
    writer = _WRITERS.get(type(obj))
    if writer is None:
        writer = _WRITERS[type(obj)] = _TableWriter(type(obj))
    return writer.write(builder, obj, ts_align)


Creator = Callable[[Builder, Any, int], int]
"""Phase 1 of one field: (builder, value, ts_align) -> offset of the out-of-line object."""
Adder = Callable[[Builder, Any, int, int], None]
"""Phase 2 of one field: (builder, value, offset from phase 1, ts_align)."""

_LOW_LEVEL = (TypeError, AttributeError, ValueError, struct.error)


class _TableWriter:
    """The compiled writer of one class: its plan turned into per-field closures."""

    __slots__ = ("adders", "creators", "getter", "num_fields", "num_slots")

    def __init__(self, cls: type) -> None:
        plan = plan_of(cls)
        names = [f.name for f in plan.fields]
        self.getter = _getter(names)
        self.num_fields = len(names)
        self.num_slots = plan.num_slots
        self.creators = [
            (i, f, _creator(f)) for i, f in enumerate(plan.fields) if f.kind in OUT_OF_LINE
        ]
        self.adders = [(i, f, _adder(f)) for i, f in enumerate(plan.fields)]

    def write(self, builder: Builder, obj: Any, ts_align: int) -> int:
        values = self.getter(obj)
        offsets = [0] * self.num_fields
        for i, f, create in self.creators:
            value = values[i]
            if value is not None or _required(f):
                offsets[i] = _of_field(f, value, create, builder, value, ts_align)
        builder.StartObject(self.num_slots)
        for i, f, add in self.adders:
            value = values[i]
            if value is not None or _required(f):
                _of_field(f, value, add, builder, value, offsets[i], ts_align)
        return int(builder.EndObject())


def _required(f: FieldPlan) -> bool:
    """False for an absent optional field (it is not written); refuses an absent required one."""
    if f.optional:
        return False
    raise ValidationError("required field is missing", path=f.name)


def _of_field(f: FieldPlan, value: Any, phase: Callable[..., Any], *args: Any) -> Any:
    """``phase(*args)`` for field ``f`` holding ``value``; its errors name the field."""
    try:
        return phase(*args)
    except ValidationError as e:
        raise e.at(f.name) from None
    except _LOW_LEVEL as e:
        raise _bad_value(f, value, e) from None


_WRITERS: dict[type, _TableWriter] = {}


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        name = names[0]
        return lambda obj: (getattr(obj, name),)
    return operator.attrgetter(*names)


def _bad_value(f: FieldPlan, value: Any, e: Exception) -> ValidationError:
    return ValidationError(
        f"cannot encode {type(value).__name__} as {f.kind.name.lower()}: {e}", path=f.name
    )


def _creator(f: FieldPlan) -> Creator:
    """Phase 1 closure for an out-of-line field."""
    kind = f.kind
    if kind is Kind.STRING:
        return _create_string
    if kind is Kind.MULTIHASH or kind is Kind.DATASET_ID:
        return _create_binary
    if kind is Kind.BYTES:
        return _create_bytes
    if kind is Kind.STRING_VEC:
        return _create_string_vector
    if kind is Kind.TABLE or kind is Kind.TABLE_VEC:
        target = f.target
        assert target is not None

        def create_table(b: Builder, value: Any, ts_align: int) -> int:
            _check_type(value, target)
            return write_table(b, value, ts_align)

        return create_table if kind is Kind.TABLE else _vector_of(create_table)
    codes = _codes(f)
    if kind is Kind.UNION:

        def create_union(b: Builder, value: Any, ts_align: int) -> int:
            _variant_code(codes, f, value)
            return write_table(b, value, ts_align)

        return create_union

    def create_wrapper(b: Builder, value: Any, ts_align: int) -> int:
        """One ``XWrapper { value: X; }`` table of a vector of unions."""
        code = _variant_code(codes, f, value)
        inner = write_table(b, value, ts_align)
        b.StartObject(2)
        b.PrependUint8Slot(0, code, 0)
        b.PrependUOffsetTRelativeSlot(1, inner, 0)
        return int(b.EndObject())

    return _vector_of(create_wrapper)


def _create_string(b: Builder, value: Any, ts_align: int) -> int:
    return int(b.CreateString(_check_str(value)))


def _create_binary(b: Builder, value: Any, ts_align: int) -> int:
    return int(b.CreateByteVector(value.to_bytes()))


def _create_bytes(b: Builder, value: Any, ts_align: int) -> int:
    if type(value) is not bytes:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise ValidationError(f"expected bytes, got {type(value).__name__}")
        value = bytes(value)
    return int(b.CreateByteVector(value))


def _create_string_vector(b: Builder, value: Any, ts_align: int) -> int:
    return _offset_vector(b, [b.CreateString(_check_str(s)) for s in _check_seq(value)])


def _vector_of(create: Creator) -> Creator:
    """Phase 1 of a vector of tables: every element in index order, then the vector."""

    def create_vector(b: Builder, value: Any, ts_align: int) -> int:
        elems = []
        for i, item in enumerate(_check_seq(value)):
            try:
                elems.append(create(b, item, ts_align))
            except ValidationError as e:
                raise e.at(f"[{i}]") from None
        return _offset_vector(b, elems)

    return create_vector


def _adder(f: FieldPlan) -> Adder:
    """Phase 2 closure: add one present field to the table under construction."""
    kind = f.kind
    slot = f.slot
    if kind is Kind.UNION:
        codes = _codes(f)

        def add_union(b: Builder, value: Any, offset: int, ts_align: int) -> None:
            b.PrependUint8Slot(slot, _variant_code(codes, f, value), 0)
            b.PrependUOffsetTRelativeSlot(slot + 1, offset, 0)

        return add_union
    if kind in OUT_OF_LINE:

        def add_offset(b: Builder, value: Any, offset: int, ts_align: int) -> None:
            b.PrependUOffsetTRelativeSlot(slot, offset, 0)

        return add_offset
    if kind is Kind.TIMESTAMP:

        def add_timestamp(b: Builder, value: Any, offset: int, ts_align: int) -> None:
            push_timestamp(b, encode_timestamp(value), ts_align)
            b.Slot(slot)

        return add_timestamp
    return _scalar_adder(f)


def _scalar_adder(f: FieldPlan) -> Adder:
    """uint64 / int32 / bool / enum: optional ones are written even when 0."""
    slot, optional, kind = f.slot, f.optional, f.kind
    if kind is Kind.ENUM:
        enum_codes = {m: i for i, m in enumerate(f.enum_members)}
        name = f.target.__name__ if f.target else "enum"

        def to_int(value: Any) -> int:
            code = enum_codes.get(value)
            if code is None:
                raise ValidationError(f"{value!r} is not a member of {name}")
            return code

        prepend: Callable[[Builder, int], None] = _prepend_int32
    elif kind is Kind.BOOL:

        def to_int(value: Any) -> int:
            if type(value) is not bool:
                raise ValidationError(f"{value!r} is not a bool")
            return int(value)

        prepend = _prepend_bool
    else:
        low, high, label = (
            (0, U64_MAX, "uint64") if kind is Kind.U64 else (I32_MIN, I32_MAX, "int32")
        )

        def to_int(value: Any) -> int:
            if not isinstance(value, int) or not low <= value <= high:
                raise ValidationError(f"{value!r} is not a{'n' if label[0] == 'i' else ''} {label}")
            return value

        prepend = _prepend_uint64 if kind is Kind.U64 else _prepend_int32

    def add_scalar(b: Builder, value: Any, offset: int, ts_align: int) -> None:
        number = to_int(value)
        if number or optional:
            prepend(b, number)
            b.Slot(slot)

    return add_scalar


def _prepend_int32(b: Builder, x: int) -> None:
    b.PrependInt32(x)


def _prepend_uint64(b: Builder, x: int) -> None:
    b.PrependUint64(x)


def _prepend_bool(b: Builder, x: int) -> None:
    b.PrependBool(bool(x))


def push_timestamp(builder: Builder, data: bytes, ts_align: int) -> None:
    """Push the 16 Timestamp struct bytes with alignment ``ts_align`` (1 or 4)."""
    builder.Prep(ts_align, TIMESTAMP_SIZE)
    head = builder.head - TIMESTAMP_SIZE
    builder.head = head
    builder.Bytes[head : head + TIMESTAMP_SIZE] = data


def _offset_vector(builder: Builder, offsets: Sequence[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return int(builder.EndVector())


def _codes(f: FieldPlan) -> dict[type, int]:
    return {v: i + 1 for i, v in enumerate(f.variants)}


def _variant_code(codes: dict[type, int], f: FieldPlan, value: Any) -> int:
    code = codes.get(type(value))
    if code is None:
        names = ", ".join(v.__name__ for v in codes)
        raise ValidationError(f"{type(value).__name__} is not a variant of {f.union} ({names})")
    return code


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
