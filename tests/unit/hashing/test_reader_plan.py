"""The batches and reads of the reference's Parquet reader, and the slots it leaves."""

from __future__ import annotations

import numpy as np
import pytest

from common.hashing.reader_plan import ReaderPlan, reader_leftovers


def test_kamus_batches_span_row_groups_and_reads_do_not() -> None:
    plan = ReaderPlan((7_000, 7_000, 7_000, 2_000))
    assert plan.batch_starts(0, 23_000).tolist() == [0, 10_000, 20_000]
    # Batch 0 is read from row groups 0 and 1, batch 1 from 1 and 2, batch 2 from 2 and 3.
    assert plan.read_starts(0, 23_000).tolist() == [0, 7_000, 10_000, 14_000, 20_000, 21_000]
    assert plan.batch_end(0) == 10_000
    assert plan.batch_end(20_000) == 23_000
    assert plan.last_batch_end(3, 22_999) == 20_000
    # Positions relative to a later first row.
    assert plan.read_starts(10_000, 10_000).tolist() == [0, 4_000]


def test_datafusions_batches_are_cut_at_row_groups() -> None:
    plan = ReaderPlan((7_000, 25_000), batches_cut_at_row_groups=True)
    assert plan.batch_starts(0, 32_000).tolist() == [0, 7_000, 17_000, 27_000]
    assert plan.read_starts(0, 32_000).tolist() == [0, 7_000, 17_000, 27_000]
    assert plan.batch_end(7_000) == 17_000
    assert plan.batch_end(27_000) == 32_000


def test_records_not_read_from_a_file_have_batches_only() -> None:
    plan = ReaderPlan()
    assert not plan.reads_known
    assert plan.batch_starts(9_000, 12_000).tolist() == [0, 1_000, 11_000]
    assert plan.read_starts(9_000, 12_000).tolist() == [0, 1_000, 11_000]
    assert plan.batch_end(10_000) == 20_000
    with pytest.raises(ValueError, match="at least one row"):
        ReaderPlan(batch_rows=0)


def test_a_null_slot_keeps_the_jth_value_of_its_read_or_zero() -> None:
    # Read 0: rows 0-5, read 1: rows 6-9.
    own = np.array([1, 0, 1, 0, 0, 1, 0, 1, 1, 0], dtype=bool)
    blank = np.array([0, 1, 0, 1, 1, 0, 1, 0, 0, 1], dtype=bool)
    source = reader_leftovers(own, blank, np.array([0, 6]))
    # Read 0 has 3 values (rows 0, 2, 5): j=1 -> row 2, j=3 and j=4 -> zero.
    # Read 1 has 2 values (rows 7, 8): j=0 -> row 7, j=3 -> zero.
    assert source.tolist() == [0, 2, 2, -1, -1, 5, 7, 7, 8, -1]


def test_a_read_without_values_leaves_zeros() -> None:
    own = np.zeros(4, dtype=bool)
    blank = np.array([1, 0, 1, 1], dtype=bool)
    assert reader_leftovers(own, blank, np.array([0])).tolist() == [-1, 1, -1, -1]
