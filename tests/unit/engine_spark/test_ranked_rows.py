"""The changelog of a ranking from one whole result to the next (``ranked_rows.group_changes``):
pairs, retractions and inserts per group, unchanged rows not emitted."""

from __future__ import annotations

import pyarrow as pa

from engine_spark.stateful.shapes.ranked_rows import group_changes

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64())])


def table(*rows: tuple[str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"k": k, "v": v} for k, v in rows], schema=SCHEMA)


def ops(changes: pa.Table) -> list[tuple[int, str, int]]:
    return [(r["op"], r["k"], r["v"]) for r in changes.to_pylist()]


def test_a_first_result_is_inserted() -> None:
    changes = group_changes(table(("b", 2), ("a", 1)), None, ["k"], "op")
    assert ops(changes.rows) == [(0, "a", 1), (0, "b", 2)]
    assert changes.emitted.to_pylist() == [{"k": "a", "v": 1}, {"k": "b", "v": 2}]


def test_a_replaced_row_is_a_pair_and_an_unchanged_one_is_not_emitted() -> None:
    before = table(("a", 1), ("b", 2))
    changes = group_changes(table(("a", 3), ("b", 2)), before, ["k"], "op")
    assert ops(changes.rows) == [(2, "a", 1), (3, "a", 3)]


def test_ties_that_shrink_are_retracted_and_ties_that_grow_inserted() -> None:
    two = table(("a", 2), ("a", 3))
    grown = group_changes(two, table(("a", 1)), ["k"], "op")
    assert ops(grown.rows) == [(2, "a", 1), (3, "a", 2), (0, "a", 3)]
    shrunk = group_changes(table(("a", 4)), grown.emitted, ["k"], "op")
    assert ops(shrunk.rows) == [(2, "a", 2), (3, "a", 4), (1, "a", 3)]


def test_without_groups_the_whole_result_is_one_group_and_duplicates_count() -> None:
    before = table(("a", 1), ("a", 1), ("b", 5))
    changes = group_changes(table(("a", 1), ("c", 9), ("b", 5)), before, [], "op")
    assert ops(changes.rows) == [(2, "a", 1), (3, "c", 9)]
    emptied = group_changes(table(), changes.emitted, ["k"], "op")
    assert ops(emptied.rows) == [(1, "a", 1), (1, "b", 5), (1, "c", 9)]
