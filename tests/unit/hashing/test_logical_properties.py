"""Properties of the logical hash over random tables of every supported type."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from common.hashing import logical_hash, value_stream
from common.odf.multihash import ARROW0_SHA3_256

from .reference_model import reference_digest
from .strategies import LEAF_TYPES, build_array, columns, tables, value_strategy

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

flat_types = st.sampled_from([t for t in LEAF_TYPES if not pa.types.is_null(t)])


@SETTINGS
@given(tables())
def test_matches_the_row_by_row_reference_model(table: pa.Table) -> None:
    result = logical_hash(table)
    assert result.code == ARROW0_SHA3_256
    assert result.digest == reference_digest(table)


@SETTINGS
@given(tables(), st.integers(1, 7))
def test_small_encoding_chunks_change_nothing(table: pa.Table, chunk_rows: int) -> None:
    with mock.patch.object(value_stream, "CHUNK_ROWS", chunk_rows):
        assert logical_hash(table).digest == reference_digest(table)


@SETTINGS
@given(tables(), st.data())
def test_invariant_under_rebatching(table: pa.Table, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, table.num_rows), max_size=5)))
    bounds = [0, *cuts, table.num_rows]
    batches = [
        table.slice(start, stop - start).combine_chunks().to_batches()
        for start, stop in itertools.pairwise(bounds)
    ]
    pieces = [b for chunk in batches for b in chunk]
    assert logical_hash(pieces, schema=table.schema) == logical_hash(table)
    assert logical_hash(pa.Table.from_batches(pieces, table.schema)) == logical_hash(table)


def _dictionary_encoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    try:
        return pc.dictionary_encode(column)
    except pa.ArrowNotImplementedError:
        return column


@SETTINGS
@given(tables())
def test_invariant_under_dictionary_encoding(table: pa.Table) -> None:
    encoded = pa.table([_dictionary_encoded(c) for c in table.columns], names=table.column_names)
    assert logical_hash(encoded) == logical_hash(table)


_LARGE = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}


def _has_fixed_size_list(t: pa.DataType) -> bool:
    if pa.types.is_fixed_size_list(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_fixed_size_list(t.value_type)
    return pa.types.is_struct(t) and any(_has_fixed_size_list(f.type) for f in t)


def _large(t: pa.DataType) -> pa.DataType:
    """``t`` with large offsets (pyarrow mis-casts lists around fixed-size lists: kept)."""
    if _has_fixed_size_list(t):
        return t
    if pa.types.is_list(t):
        return pa.large_list(_large(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _large(f.type)) for f in t])
    return _LARGE.get(t, t)


def _cast_columns(table: pa.Table, convert: Callable[[pa.DataType], pa.DataType]) -> pa.Table:
    """Cast the columns whose type ``convert`` changes (the others stay untouched).

    pyarrow's cast of lists nested over the null type can build invalid arrays (a pyarrow
    defect, not ours); such examples are skipped rather than hashed.
    """
    columns = [c if convert(c.type) == c.type else c.cast(convert(c.type)) for c in table.columns]
    try:
        cast = pa.table(columns, names=table.column_names)
        cast.validate(full=True)
    except pa.ArrowInvalid:
        assume(False)
    return cast


@SETTINGS
@given(tables())
def test_large_and_view_encodings_hash_the_same(table: pa.Table) -> None:
    assert logical_hash(_cast_columns(table, _large)) == logical_hash(table)
    views = {pa.string(): pa.string_view(), pa.binary(): pa.binary_view()}
    viewed = _cast_columns(table, lambda t: views.get(t, t))
    assert logical_hash(viewed) == logical_hash(table)


@SETTINGS
@given(tables(), st.data())
def test_invariant_under_slicing(table: pa.Table, data: st.DataObject) -> None:
    """Arrays with offsets (slices of larger arrays) hash like fresh arrays."""
    start = data.draw(st.integers(0, table.num_rows))
    length = data.draw(st.integers(0, table.num_rows - start))
    sliced = table.slice(start, length)
    fresh = pc.take(table, pa.array(range(start, start + length), pa.int64()))  # copies
    assert logical_hash(sliced) == logical_hash(fresh)
    assert logical_hash(sliced).digest == reference_digest(sliced)


# -- sensitivity ---------------------------------------------------------------------------


@SETTINGS
@given(
    st.integers(1, 12).flatmap(lambda rows: columns(rows, flat_types, allow_nan=False)), st.data()
)
def test_changes_when_a_value_changes(
    column: tuple[pa.DataType, list[object]], data: st.DataObject
) -> None:
    data_type, values = column
    row = data.draw(st.integers(0, len(values) - 1))
    replacement = data.draw(value_strategy(data_type, allow_nan=False))
    before, after = (
        build_array(data_type, values),
        build_array(data_type, [*values[:row], replacement, *values[row + 1 :]]),
    )
    assume(values[row] is not None and values[row] != replacement)
    table_before = pa.table({"c": before})
    table_after = pa.table({"c": after})
    assert logical_hash(table_before) != logical_hash(table_after)


@SETTINGS
@given(st.integers(1, 12).flatmap(lambda rows: columns(rows, flat_types)), st.data())
def test_changes_when_a_value_becomes_null(
    column: tuple[pa.DataType, list[object]], data: st.DataObject
) -> None:
    data_type, values = column
    row = data.draw(st.integers(0, len(values) - 1))
    assume(values[row] is not None)
    # The reference's null marker is one 0x00 byte, the same bytes as a one-byte zero:
    # int8/uint8 0 and null hash alike (see test_logical_vectors). Any other value differs.
    assume(not (data_type in (pa.int8(), pa.uint8()) and values[row] == 0))
    nulled = [*values[:row], None, *values[row + 1 :]]
    before = pa.table({"c": build_array(data_type, values)})
    after = pa.table({"c": build_array(data_type, nulled)})
    assert logical_hash(before) != logical_hash(after)


@SETTINGS
@given(tables(max_columns=3), st.text(min_size=1, max_size=3))
def test_changes_when_a_column_is_renamed(table: pa.Table, name: str) -> None:
    assume(name not in table.column_names)
    renamed = table.rename_columns([name, *table.column_names[1:]])
    assert logical_hash(renamed) != logical_hash(table)


@SETTINGS
@given(tables(max_columns=3))
def test_changes_when_columns_are_reordered(table: pa.Table) -> None:
    assume(table.num_columns >= 2)
    reordered = table.select([1, 0, *range(2, table.num_columns)])
    assert logical_hash(reordered) != logical_hash(table)


_WIDER = {
    pa.int8(): pa.int16(),
    pa.int16(): pa.int32(),
    pa.int32(): pa.int64(),
    pa.uint8(): pa.uint16(),
    pa.uint32(): pa.int64(),
    pa.float32(): pa.float64(),
    pa.string(): pa.binary(),
    pa.timestamp("us"): pa.timestamp("us", "UTC"),
    pa.date32(): pa.date64(),
    pa.decimal128(9, 2): pa.decimal128(10, 2),
}


@SETTINGS
@given(st.sampled_from(sorted(_WIDER, key=str)).flatmap(lambda t: columns(4, st.just(t))))
def test_changes_when_the_type_changes(column: tuple[pa.DataType, list[object]]) -> None:
    data_type, values = column
    before = pa.table({"c": build_array(data_type, values)})
    after = before.cast(pa.schema([pa.field("c", _WIDER[data_type])]))
    assert logical_hash(before) != logical_hash(after)


def _null_mask(pattern: str, rows: int) -> np.ndarray:
    index = np.arange(rows)
    if pattern == "clustered":  # few runs: valid runs are hashed straight from the buffers
        return (index > rows // 3) & (index < rows // 2)
    return np.random.default_rng(5).random(rows) < 0.3  # many runs: markers put in place


@pytest.mark.parametrize("pattern", ["clustered", "scattered"])
@pytest.mark.parametrize(
    "data_type", [pa.int64(), pa.decimal128(22, 2), pa.string(), pa.list_(pa.int8()), pa.bool_()]
)
def test_null_layouts_match_the_reference_model(pattern: str, data_type: pa.DataType) -> None:
    rows = 3_000
    rng = np.random.default_rng(11)
    values = rng.integers(0, 100, rows)
    builders = {
        pa.int64(): lambda: pa.array(values),
        pa.decimal128(22, 2): lambda: pa.array(values).cast(pa.decimal128(22, 2)),
        pa.string(): lambda: pa.array(values.astype(str)),
        pa.list_(pa.int8()): lambda: pa.array(
            [[v % 7] * (v % 3) for v in values], pa.list_(pa.int8())
        ),
        pa.bool_(): lambda: pa.array(values % 2 == 0),
    }
    nulls = pa.array(_null_mask(pattern, rows))
    column = pc.if_else(nulls, pa.scalar(None, data_type), builders[data_type]())
    table = pa.table({"c": column})
    assert logical_hash(table).digest == reference_digest(table)


def test_columns_hashed_on_the_calling_thread_hash_the_same() -> None:
    """``parallel=False`` (the ingest pipeline's hasher) changes the threads, not the hash,
    also on batches large enough for the parallel path and with nulls and structs."""
    from common.hashing.record_digest import _PARALLEL_MIN_ROWS, LogicalHasher

    n = _PARALLEL_MIN_ROWS * 2 + 17
    ids = pa.array(np.arange(n))
    names = pc.cast(pc.if_else(pc.equal(pc.bit_wise_and(ids, 7), 3), None, ids), pa.string())
    place = pa.StructArray.from_arrays([ids, names], names=["id", "name"])
    batch = pa.RecordBatch.from_arrays([ids, names, place], names=["a", "b", "place"])
    digests = []
    for parallel in (True, False):
        hasher = LogicalHasher(batch.schema, parallel=parallel)
        hasher.update(batch.slice(0, n // 3))
        hasher.update(batch.slice(n // 3))
        digests.append(hasher.multihash())
    assert digests[0] == digests[1] == logical_hash(batch)
