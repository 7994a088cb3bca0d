"""Streamed outputs are re-cut into row groups of a fixed size, whatever Spark's batches."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine_spark.output_stream import row_groups


def batch(start: int, n: int) -> pa.RecordBatch:
    return pa.record_batch({"v": pa.array(range(start, start + n), pa.int64())})


def test_batches_are_recut_into_full_row_groups_then_the_rest() -> None:
    sizes = [3, 0, 4, 5, 1, 9]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    groups = list(row_groups(iter([batch(s, n) for s, n in zip(starts, sizes, strict=True)]), 4))
    assert [g.num_rows for g in groups] == [4, 4, 4, 4, 4, 2]
    assert pa.concat_tables(groups).column("v").to_pylist() == list(range(22))


def test_fewer_records_than_a_row_group_make_one_and_none_make_none() -> None:
    (only,) = row_groups(iter([batch(0, 3), batch(3, 2)]), 1 << 20)
    assert only.column("v").to_pylist() == [0, 1, 2, 3, 4]
    assert list(row_groups(iter([batch(0, 0)]), 4)) == []
    assert list(row_groups(iter([]), 4)) == []


def test_a_row_group_needs_a_record() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        list(row_groups(iter([batch(0, 1)]), 0))
