"""Hypothesis strategies: Arrow columns of every type the logical hash supports."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

MAX_ROWS = 24

INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
UINT_TYPES = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
# Fixed-size types stored as integers: values are drawn as ints and viewed as the type.
INT_BACKED = [
    (pa.date32(), pa.int32()),
    (pa.date64(), pa.int64()),
    (pa.time32("s"), pa.int32()),
    (pa.time32("ms"), pa.int32()),
    (pa.time64("us"), pa.int64()),
    (pa.time64("ns"), pa.int64()),
    *[(pa.timestamp(u), pa.int64()) for u in ("s", "ms", "us", "ns")],
    (pa.timestamp("us", "UTC"), pa.int64()),
    (pa.timestamp("ns", "+01:00"), pa.int64()),
    (pa.timestamp("ms", "Europe/Berlin"), pa.int64()),
]
DECIMALS = [pa.decimal128(9, 2), pa.decimal128(38, 0), pa.decimal256(40, 3), pa.decimal128(5, -2)]
BINARIES = [pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.binary(3)]
FLOATS = [pa.float16(), pa.float32(), pa.float64()]

LEAF_TYPES: list[pa.DataType] = [
    *INT_TYPES,
    *UINT_TYPES,
    *FLOATS,
    *[t for t, _ in INT_BACKED],
    *DECIMALS,
    *BINARIES,
    pa.bool_(),
    pa.null(),
]


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_unsigned_integer(t):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def value_strategy(t: pa.DataType, *, allow_nan: bool = True) -> st.SearchStrategy[Any]:
    """Python values of type ``t`` (ints for int-backed temporal types)."""
    for temporal, storage in INT_BACKED:
        if t == temporal:
            return value_strategy(storage)
    if pa.types.is_integer(t):
        lo, hi = _int_range(t)
        return st.integers(lo, hi)
    if pa.types.is_floating(t):
        width = {16: 16, 32: 32, 64: 64}[t.bit_width]
        return st.floats(width=width, allow_nan=allow_nan)  # type: ignore[arg-type]
    if pa.types.is_decimal(t):  # the unscaled integer
        return st.integers(-(10**t.precision) + 1, 10**t.precision - 1)
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_fixed_size_binary(t):
        return st.binary(min_size=t.byte_width, max_size=t.byte_width)
    if t in (pa.string(), pa.large_string()):
        return st.text(max_size=6)
    if t in (pa.binary(), pa.large_binary()):
        return st.binary(max_size=6)
    if pa.types.is_null(t):
        return st.none()
    if pa.types.is_fixed_size_list(t):
        return st.lists(
            st.none() | value_strategy(t.value_type, allow_nan=allow_nan),
            min_size=t.list_size,
            max_size=t.list_size,
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = st.none() | value_strategy(t.value_type, allow_nan=allow_nan)
        return st.lists(item, max_size=4)
    if pa.types.is_struct(t):
        return st.fixed_dictionaries(
            {f.name: st.none() | value_strategy(f.type, allow_nan=allow_nan) for f in t}
        )
    raise NotImplementedError(str(t))


def build_array(t: pa.DataType, values: list[Any]) -> pa.Array:
    """``values`` (``None`` = null) as an array of type ``t``."""
    for temporal, storage in INT_BACKED:
        if t == temporal:
            return build_array(storage, values).view(t)
    if t == pa.float16():
        mask = np.array([v is None for v in values], dtype=bool)
        data = np.array([0.0 if v is None else v for v in values], dtype=np.float16)
        return pa.array(data, type=t, mask=mask)
    if pa.types.is_decimal(t):
        return _build_decimal(t, values)
    if pa.types.is_struct(t):
        return _build_struct(t, values)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _build_list(t, values)
    return pa.array(values, type=t)


def _validity(values: list[Any]) -> pa.Buffer:
    valid = np.array([v is not None for v in values], dtype=np.bool_)
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _build_decimal(t: pa.DataType, values: list[Any]) -> pa.Array:
    width = t.byte_width
    data = b"".join((v or 0).to_bytes(width, "little", signed=True) for v in values)
    return pa.Array.from_buffers(t, len(values), [_validity(values), pa.py_buffer(data)])


def _build_list(t: pa.DataType, values: list[Any]) -> pa.Array:
    items = [item for v in values if v is not None for item in v]
    child = build_array(t.value_type, items)
    mask = pa.array([v is None for v in values], pa.bool_())
    if pa.types.is_fixed_size_list(t):
        padded = [v if v is not None else [None] * t.list_size for v in values]
        child = build_array(t.value_type, [item for v in padded for item in v])
        return pa.FixedSizeListArray.from_arrays(child, t.list_size, mask=mask)
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum([0 if v is None else len(v) for v in values], out=offsets[1:])
    array_class = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    offset_type = pa.int64() if pa.types.is_large_list(t) else pa.int32()
    return array_class.from_arrays(pa.array(offsets, offset_type), child, mask=mask)


def _build_struct(t: pa.StructType, values: list[Any]) -> pa.Array:
    children = [build_array(f.type, [None if v is None else v[f.name] for v in values]) for f in t]
    mask = pa.array([v is None for v in values], pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)


leaf_types = st.sampled_from(LEAF_TYPES)


def _nested(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    listable = children.filter(lambda t: not pa.types.is_struct(t))
    return st.one_of(
        listable.map(pa.list_),
        listable.map(pa.large_list),
        # pyarrow mis-casts fixed-size lists of nulls, so they are left out.
        listable.filter(lambda t: not pa.types.is_null(t)).map(lambda t: pa.list_(t, 2)),
        st.lists(children, min_size=1, max_size=3).map(
            lambda ts: pa.struct([pa.field(f"f{i}", t) for i, t in enumerate(ts)])
        ),
    )


any_types = st.recursive(leaf_types, _nested, max_leaves=4)


@st.composite
def columns(
    draw: st.DrawFn,
    rows: int,
    types: st.SearchStrategy[pa.DataType] = any_types,
    *,
    allow_nan: bool = True,
) -> tuple[pa.DataType, list[Any]]:
    t = draw(types)
    item = value_strategy(t, allow_nan=allow_nan)
    nullable = st.none() | item if draw(st.booleans()) else item
    return t, draw(st.lists(nullable, min_size=rows, max_size=rows))


@st.composite
def tables(
    draw: st.DrawFn,
    types: st.SearchStrategy[pa.DataType] = any_types,
    *,
    max_columns: int = 4,
    allow_nan: bool = True,
) -> pa.Table:
    rows = draw(st.integers(0, MAX_ROWS))
    count = draw(st.integers(1, max_columns))
    names = draw(
        st.lists(st.text(min_size=1, max_size=3), min_size=count, max_size=count, unique=True)
    )
    arrays = []
    for _ in names:
        t, values = draw(columns(rows, types, allow_nan=allow_nan))
        arrays.append(build_array(t, values))
    return pa.table(arrays, names=names)
