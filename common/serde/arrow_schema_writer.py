"""Write Arrow ``Schema`` flatbuffers with arrow-rs 52's builder call order (see arrow_schema)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import flatbuffers
import pyarrow as pa
import pyarrow.lib as palib

from common.odf.errors import ValidationError
from common.serde import arrow_schema_fbs as fbs
from common.serde.arrow_schema_fbs import ArrowType

_TIME_UNIT_CODE = {u: i for i, u in enumerate(fbs.TIME_UNITS)}

# Empty type tables that are created before their empty children vector.
_EMPTY_TABLE_TYPES = {
    palib.Type_NA: ArrowType.NULL,
    palib.Type_BOOL: ArrowType.BOOL,
    palib.Type_BINARY: ArrowType.BINARY,
    palib.Type_LARGE_BINARY: ArrowType.LARGE_BINARY,
    palib.Type_BINARY_VIEW: ArrowType.BINARY_VIEW,
    palib.Type_STRING_VIEW: ArrowType.UTF8_VIEW,
    palib.Type_STRING: ArrowType.UTF8,
    palib.Type_LARGE_STRING: ArrowType.LARGE_UTF8,
}
_INT_TYPES = {
    palib.Type_INT8: (True, 8),
    palib.Type_INT16: (True, 16),
    palib.Type_INT32: (True, 32),
    palib.Type_INT64: (True, 64),
    palib.Type_UINT8: (False, 8),
    palib.Type_UINT16: (False, 16),
    palib.Type_UINT32: (False, 32),
    palib.Type_UINT64: (False, 64),
}
_FLOAT_PRECISION = {
    palib.Type_HALF_FLOAT: fbs.PRECISION_HALF,
    palib.Type_FLOAT: fbs.PRECISION_SINGLE,
    palib.Type_DOUBLE: fbs.PRECISION_DOUBLE,
}


def write_schema(schema: pa.Schema) -> bytes:
    """The bytes arrow-rs 52 ``schema_to_fb`` writes for ``schema``, metadata keys sorted."""
    return _SchemaEncoder().encode(schema)


_Offsets = tuple[int, int, int]  # (type code, type table offset, children vector offset)


class _SchemaEncoder:
    """One-shot encoder: one fresh builder per schema, like ``schema_to_fb``."""

    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1024)
        self._by_type: dict[int, Callable[[Any], _Offsets]] = {
            palib.Type_FIXED_SIZE_BINARY: self._fixed_size_binary,
            palib.Type_DATE32: lambda t: self._date(fbs.DATE_DAY),
            palib.Type_DATE64: lambda t: self._date(fbs.MILLISECOND),
            palib.Type_TIME32: self._time,
            palib.Type_TIME64: self._time,
            palib.Type_TIMESTAMP: self._timestamp,
            palib.Type_INTERVAL_MONTH_DAY_NANO: self._interval,
            palib.Type_DURATION: self._duration,
            palib.Type_LIST: lambda t: self._one_child(ArrowType.LIST, t.value_field),
            palib.Type_LARGE_LIST: lambda t: self._one_child(ArrowType.LARGE_LIST, t.value_field),
            palib.Type_FIXED_SIZE_LIST: self._fixed_size_list,
            palib.Type_MAP: self._map,
            palib.Type_STRUCT: self._struct,
            palib.Type_RUN_END_ENCODED: self._run_end_encoded,
            palib.Type_SPARSE_UNION: self._union,
            palib.Type_DENSE_UNION: self._union,
            palib.Type_DECIMAL128: lambda t: self._decimal(t, 128),
            palib.Type_DECIMAL256: lambda t: self._decimal(t, 256),
            palib.Type_DICTIONARY: lambda t: self._type(t.value_type),
        }

    def encode(self, schema: pa.Schema) -> bytes:
        b = self.b
        fields = [self._field(f) for f in schema]
        fields_vec = self._offsets_vector(fields)
        metadata = self._metadata(schema.metadata) if schema.metadata else None
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(1, fields_vec, 0)
        if metadata is not None:
            b.PrependUOffsetTRelativeSlot(2, metadata, 0)
        b.Finish(b.EndObject())
        return bytes(b.Output())

    # -- building blocks ------------------------------------------------------------------

    def _offsets_vector(self, offsets: list[int]) -> int:
        b = self.b
        b.StartVector(4, len(offsets), 4)
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return int(b.EndVector())

    def _empty_children(self) -> int:
        return self._offsets_vector([])

    def _empty_table(self) -> int:
        self.b.StartObject(0)
        return int(self.b.EndObject())

    def _metadata(self, metadata: Mapping[bytes, bytes]) -> int:
        b = self.b
        entries = []
        for key in sorted(metadata):
            k = b.CreateString(key)
            v = b.CreateString(metadata[key])
            b.StartObject(2)
            b.PrependUOffsetTRelativeSlot(0, k, 0)
            b.PrependUOffsetTRelativeSlot(1, v, 0)
            entries.append(b.EndObject())
        return self._offsets_vector(entries)

    def _field(self, field: pa.Field) -> int:
        b = self.b
        metadata = self._metadata(field.metadata) if field.metadata else None
        name = b.CreateString(field.name)
        type_code, type_off, children = self._type(field.type)
        dictionary = self._dictionary(field.type) if _is_dictionary(field.type) else None
        b.StartObject(7)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        if dictionary is not None:
            b.PrependUOffsetTRelativeSlot(4, dictionary, 0)
        b.PrependUint8Slot(2, type_code, 0)
        b.PrependBoolSlot(1, field.nullable, False)
        b.PrependUOffsetTRelativeSlot(5, children, 0)
        b.PrependUOffsetTRelativeSlot(3, type_off, 0)
        if metadata is not None:
            b.PrependUOffsetTRelativeSlot(6, metadata, 0)
        return int(b.EndObject())

    def _dictionary(self, dtype: pa.DictionaryType) -> int:
        b = self.b
        index = _INT_TYPES.get(dtype.index_type.id)
        if index is None:
            raise ValidationError(f"dictionary index type {dtype.index_type} is not an integer")
        index_off = self._int_table(*index)
        b.StartObject(4)
        b.PrependInt64Slot(0, 0, 0)  # id: pyarrow schemas carry none; arrow-rs defaults to 0
        b.PrependUOffsetTRelativeSlot(1, index_off, 0)
        b.PrependBoolSlot(2, bool(dtype.ordered), False)
        return int(b.EndObject())

    def _int_table(self, signed: bool, bit_width: int) -> int:
        b = self.b
        b.StartObject(2)
        b.PrependBoolSlot(1, signed, False)
        b.PrependInt32Slot(0, bit_width, 0)
        return int(b.EndObject())

    # -- get_fb_field_type ------------------------------------------------------------------

    def _type(self, dtype: pa.DataType) -> _Offsets:
        tid = dtype.id
        if tid in _EMPTY_TABLE_TYPES:
            table = self._empty_table()
            return _EMPTY_TABLE_TYPES[tid], table, self._empty_children()
        if tid in _INT_TYPES:
            children = self._empty_children()
            return ArrowType.INT, self._int_table(*_INT_TYPES[tid]), children
        if tid in _FLOAT_PRECISION:
            children = self._empty_children()
            self.b.StartObject(1)
            self.b.PrependInt16Slot(0, _FLOAT_PRECISION[tid], fbs.PRECISION_HALF)
            return ArrowType.FLOATING_POINT, int(self.b.EndObject()), children
        handler = self._by_type.get(tid)
        if handler is None:
            raise ValidationError(f"Arrow type {dtype} cannot be written by arrow-rs 52 IPC")
        return handler(dtype)

    def _scalar_table(self, type_code: int, add: Callable[[flatbuffers.Builder], None]) -> _Offsets:
        """A type table with only inline fields, created before its empty children vector."""
        self.b.StartObject(3)
        add(self.b)
        table = int(self.b.EndObject())
        return type_code, table, self._empty_children()

    def _fixed_size_binary(self, t: pa.FixedSizeBinaryType) -> _Offsets:
        return self._scalar_table(
            ArrowType.FIXED_SIZE_BINARY, lambda b: b.PrependInt32Slot(0, t.byte_width, 0)
        )

    def _date(self, unit: int) -> _Offsets:
        return self._scalar_table(
            ArrowType.DATE, lambda b: b.PrependInt16Slot(0, unit, fbs.MILLISECOND)
        )

    def _time(self, t: pa.DataType) -> _Offsets:
        def add(b: flatbuffers.Builder) -> None:
            b.PrependInt32Slot(1, t.bit_width, 32)
            b.PrependInt16Slot(0, _TIME_UNIT_CODE[t.unit], fbs.MILLISECOND)

        return self._scalar_table(ArrowType.TIME, add)

    def _timestamp(self, t: pa.TimestampType) -> _Offsets:
        b = self.b
        tz = t.tz or ""
        tz_str = b.CreateString(tz)  # always created, even when empty (orphan string)
        b.StartObject(2)
        b.PrependInt16Slot(0, _TIME_UNIT_CODE[t.unit], 0)
        if tz:
            b.PrependUOffsetTRelativeSlot(1, tz_str, 0)
        table = int(b.EndObject())
        return ArrowType.TIMESTAMP, table, self._empty_children()

    def _interval(self, t: pa.DataType) -> _Offsets:
        return self._scalar_table(
            ArrowType.INTERVAL,
            lambda b: b.PrependInt16Slot(0, fbs.INTERVAL_MONTH_DAY_NANO, fbs.INTERVAL_YEAR_MONTH),
        )

    def _duration(self, t: pa.DurationType) -> _Offsets:
        unit = _TIME_UNIT_CODE[t.unit]
        return self._scalar_table(
            ArrowType.DURATION, lambda b: b.PrependInt16Slot(0, unit, fbs.MILLISECOND)
        )

    def _decimal(self, t: pa.DataType, bit_width: int) -> _Offsets:
        def add(b: flatbuffers.Builder) -> None:
            b.PrependInt32Slot(0, t.precision, 0)
            b.PrependInt32Slot(1, t.scale, 0)
            b.PrependInt32Slot(2, bit_width, 128)

        return self._scalar_table(ArrowType.DECIMAL, add)

    def _one_child(self, type_code: int, child: pa.Field) -> _Offsets:
        child_off = self._field(child)
        table = self._empty_table()
        return type_code, table, self._offsets_vector([child_off])

    def _fixed_size_list(self, t: pa.FixedSizeListType) -> _Offsets:
        b = self.b
        child = self._field(t.value_field)
        b.StartObject(1)
        b.PrependInt32Slot(0, t.list_size, 0)
        table = int(b.EndObject())
        return ArrowType.FIXED_SIZE_LIST, table, self._offsets_vector([child])

    def _map(self, t: pa.MapType) -> _Offsets:
        b = self.b
        child = self._field(t.field(0))
        b.StartObject(1)
        b.PrependBoolSlot(0, bool(t.keys_sorted), False)
        table = int(b.EndObject())
        return ArrowType.MAP, table, self._offsets_vector([child])

    def _struct(self, t: pa.StructType) -> _Offsets:
        children = [self._field(t.field(i)) for i in range(t.num_fields)]
        table = self._empty_table()
        return ArrowType.STRUCT, table, self._offsets_vector(children)

    def _run_end_encoded(self, t: pa.DataType) -> _Offsets:
        children = [self._field(t.field(0)), self._field(t.field(1))]
        table = self._empty_table()
        return ArrowType.RUN_END_ENCODED, table, self._offsets_vector(children)

    def _union(self, t: pa.UnionType) -> _Offsets:
        b = self.b
        children = [self._field(t.field(i)) for i in range(t.num_fields)]
        codes = list(t.type_codes)
        b.StartVector(4, len(codes), 4)
        for code in reversed(codes):
            b.PrependInt32(code)
        type_ids = int(b.EndVector())
        b.StartObject(2)
        b.PrependInt16Slot(
            0, fbs.UNION_DENSE if t.mode == "dense" else fbs.UNION_SPARSE, fbs.UNION_SPARSE
        )
        b.PrependUOffsetTRelativeSlot(1, type_ids, 0)
        table = int(b.EndObject())
        return ArrowType.UNION, table, self._offsets_vector(children)


def _is_dictionary(dtype: pa.DataType) -> bool:
    return bool(dtype.id == palib.Type_DICTIONARY)
