"""The changelog of an unbounded aggregation: +I for a new key, -U/+U when a row changed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine_spark.changelog import changelog

SCHEMA = pa.schema([("k", pa.string()), ("total", pa.int64())])


def table(*rows: tuple[str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"k": k, "total": t} for k, t in rows], schema=SCHEMA)


def test_new_keys_are_inserts_and_changed_keys_are_update_pairs() -> None:
    first = changelog([table(("b", 2), ("a", 1))], None, ["k"], "op")
    assert first.rows.to_pylist() == [
        {"k": "a", "total": 1, "op": 0},
        {"k": "b", "total": 2, "op": 0},
    ]
    second = changelog([table(("a", 5), ("b", 2), ("c", 1))], first.emitted, ["k"], "op")
    assert second.rows.to_pylist() == [
        {"k": "a", "total": 1, "op": 2},
        {"k": "a", "total": 5, "op": 3},
        {"k": "c", "total": 1, "op": 0},
    ]
    assert second.emitted.to_pylist() == [
        {"k": "a", "total": 5},
        {"k": "b", "total": 2},
        {"k": "c", "total": 1},
    ]


def test_a_key_updated_by_several_micro_batches_is_emitted_once_with_its_last_row() -> None:
    result = changelog([table(("a", 1)), table(("a", 3))], table(("a", 0)), ["k"], "op")
    assert [(r["total"], r["op"]) for r in result.rows.to_pylist()] == [(0, 2), (3, 3)]


def test_nothing_changed_emits_nothing() -> None:
    result = changelog([], table(("a", 1)), ["k"], "op")
    assert result.rows.num_rows == 0 and result.emitted.num_rows == 1


def test_no_updates_and_no_state_is_an_error() -> None:
    with pytest.raises(ValueError, match="needs updates"):
        changelog([], None, ["k"], "op")
