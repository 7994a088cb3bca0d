"""Result validation, system columns, operation types and row order (pure pyarrow)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from common.odf.fragments import DatasetVocabulary
from engine_spark.errors import InvalidQueryError
from engine_spark.ordering import (
    ORDER_PRESERVING_NODES,
    RowOrder,
    classify_plan,
    sort_by_values,
)
from engine_spark.outputs import build_output, normalize_ops, offsets, plan_output_columns
from engine_spark.schema_evolution import check_schema_evolution

VOCAB = DatasetVocabulary()
T = datetime(2024, 1, 1, tzinfo=UTC)


def test_plan_output_columns_finds_system_and_data_columns() -> None:
    cols = plan_output_columns(
        [("city", "string"), ("event_time", "date"), ("op", "bigint"), ("n", "int")], VOCAB
    )
    assert (cols.event_time, cols.op, cols.data) == ("event_time", "op", ("city", "n"))


@pytest.mark.parametrize(
    ("columns", "words"),
    [
        ([("event_time", "timestamp"), ("offset", "bigint")], "collides with the system column"),
        ([("event_time", "timestamp"), ("a", "int"), ("A", "int")], "two columns named 'A'"),
        ([("a", "int")], "no 'event_time' column"),
        ([("event_time", "timestamp_ntz")], "got TIMESTAMP_NTZ"),
        ([("event_time", "timestamp"), ("op", "string")], "must be an integer"),
    ],
)
def test_plan_output_columns_rejects(columns: list[tuple[str, str]], words: str) -> None:
    with pytest.raises(InvalidQueryError) as info:
        plan_output_columns(columns, VOCAB)
    assert words in str(info.value)


def test_build_output_adds_system_columns_with_reference_types() -> None:
    result = pa.table(
        {
            "name": ["a", "b"],
            "event_time": pa.array([1_500, 2_500], pa.timestamp("us", tz="UTC")),
        }
    )
    cols = plan_output_columns([("name", "string"), ("event_time", "timestamp")], VOCAB)
    out = build_output(result, cols, VOCAB, system_time=T, next_offset=7)
    assert out.schema == pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32()),
            pa.field("system_time", pa.timestamp("ms", tz="UTC"), nullable=False),
            pa.field("event_time", pa.timestamp("ms", tz="UTC")),
            pa.field("name", pa.string()),
        ]
    )
    assert out.column("offset").to_pylist() == [7, 8]
    assert out.column("op").to_pylist() == [0, 0]
    assert out.column("event_time").cast(pa.int64()).to_pylist() == [1, 2]


def test_normalize_ops_repairs_split_corrections() -> None:
    ops = pa.chunked_array([[0, 2, 3, 3, 2, 1, 2]], pa.int64())
    assert normalize_ops(ops, column="op").to_pylist() == [0, 2, 3, 0, 1, 1, 1]
    with pytest.raises(InvalidQueryError, match="operation type 9 at result row 1"):
        normalize_ops(pa.chunked_array([[0, 9]]), column="op")
    with pytest.raises(InvalidQueryError, match="null"):
        normalize_ops(pa.chunked_array([[0, None]], pa.int32()), column="op")


class Node:
    def __init__(self, name: str, *children: Node, global_sort: bool = True) -> None:
        self.name, self.children = name, list(children)
        self.is_global_sort = name == "Sort" and global_sort
        self.preserves_order = not global_sort if name == "Sort" else name in ORDER_PRESERVING_NODES


def test_classify_plan() -> None:
    scan = Node("Relation")
    assert classify_plan(Node("Project", Node("Filter", scan))) is RowOrder.INPUT
    assert classify_plan(Node("Union", Node("Project", scan), scan)) is RowOrder.INPUT
    assert classify_plan(Node("Aggregate", scan)) is RowOrder.VALUES
    assert classify_plan(Node("Union", scan, Node("Join", scan, scan))) is RowOrder.VALUES
    assert classify_plan(Node("Project", Node("Sort", Node("Aggregate", scan)))) is RowOrder.QUERY
    backlog = Node("Sort", Node("Filter", scan), global_sort=False)
    assert classify_plan(Node("Project", backlog)) is RowOrder.INPUT


def test_sort_by_values_is_total_and_skips_nested_columns() -> None:
    table = pa.table(
        {
            "x": [2, 1, 1],
            "event_time": [5, 5, 4],
            "nested": [[1], [2], [3]],
            "op": [0, 1, 0],
        }
    )
    out = sort_by_values(table, ["event_time"], ["op"])
    assert out.to_pydict() == {
        "x": [1, 1, 2],
        "event_time": [4, 5, 5],
        "nested": [[3], [2], [1]],
        "op": [0, 1, 0],
    }


def test_schema_evolution_allows_only_appended_columns() -> None:
    old = pa.schema([("a", pa.int64()), ("b", pa.string())])
    check_schema_evolution(old, old.append(pa.field("c", pa.int32())))
    with pytest.raises(InvalidQueryError, match="drops column 'b'"):
        check_schema_evolution(old, pa.schema([("a", pa.int64())]))
    with pytest.raises(InvalidQueryError, match="type of column 'a' from int64 to int32"):
        check_schema_evolution(old, pa.schema([("a", pa.int32()), ("b", pa.string())]))
    with pytest.raises(InvalidQueryError, match="column 'c' at position 1"):
        check_schema_evolution(old, pa.schema([("a", pa.int64()), ("c", pa.string())]))


def test_offsets_are_contiguous_int64_from_the_start() -> None:
    assert offsets(7, 4).to_pylist() == [7, 8, 9, 10]
    assert offsets(2**40, 2).to_pylist() == [2**40, 2**40 + 1]
    empty = offsets(0, 0)
    assert len(empty) == 0 and empty.type == pa.int64()
