"""Merge strategies against the input/expected tables of the reference's tests.

Event time is the ``year`` column, as in the reference's merge tests; expected outputs are
compared after the writer's stable sort by the strategy's keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from coordinator.ingest.errors import MergeError
from coordinator.ingest.history import History
from coordinator.ingest.merge import AppendMerge, LedgerMerge, SnapshotMerge
from coordinator.ingest.system_columns import Op
from tests.unit.ingest.helpers import ledger_history, rows, sort_by, stream

A, R, CF, CT = Op.APPEND, Op.RETRACT, Op.CORRECT_FROM, Op.CORRECT_TO
DATA = pa.schema([("year", pa.int64()), ("city", pa.string()), ("population", pa.int64())])
LEDGER = pa.schema([("op", pa.int32()), *DATA])


def data(*records: tuple[Any, ...]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(DATA.names, r, strict=True)) for r in records], DATA)


def ledger(*records: tuple[Any, ...]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(LEDGER.names, r, strict=True)) for r in records], LEDGER)


def merged(strategy: Any, history: History, new: pa.Table) -> list[tuple[Any, ...]]:
    result = strategy.merge(stream(new), history)
    out = pa.Table.from_batches(list(result), schema=result.schema)
    return rows(sort_by(out, strategy.sort_keys))


def append() -> AppendMerge:
    return AppendMerge(op_column="op", event_time_column="year")


def ledger_merge(*pk: str) -> LedgerMerge:
    return LedgerMerge(primary_key=pk, op_column="op", event_time_column="year")


def snapshot(*pk: str, compare: tuple[str, ...] | None = None) -> SnapshotMerge:
    return SnapshotMerge(
        primary_key=pk,
        compare_columns=compare,
        op_column="op",
        event_time_column="year",
        offset_column="offset",
    )


# --- Append ------------------------------------------------------------------------------------


def test_append_to_empty() -> None:
    new = data((2020, "vancouver", 1), (2021, "seattle", 2), (2022, "kyiv", 3))
    assert merged(append(), History.empty(), new) == [
        (A, 2020, "vancouver", 1),
        (A, 2021, "seattle", 2),
        (A, 2022, "kyiv", 3),
    ]


def test_append_to_some(tmp_path: Path) -> None:
    prev = ledger((A, 2020, "vancouver", 1), (A, 2021, "seattle", 2), (A, 2022, "kyiv", 3))
    new = data((2023, "vancouver", 1), (2024, "odessa", 4))
    assert merged(append(), ledger_history(tmp_path, prev), new) == [
        (A, 2023, "vancouver", 1),
        (A, 2024, "odessa", 4),
    ]


# --- Ledger ------------------------------------------------------------------------------------

LEDGER_PREV = ((A, 2020, "vancouver", 1), (A, 2020, "seattle", 2), (A, 2020, "kyiv", 3))


def test_ledger_to_empty() -> None:
    new = data((2020, "vancouver", 1), (2020, "seattle", 2), (2020, "kyiv", 3))
    assert merged(ledger_merge("year", "city"), History.empty(), new) == [
        (A, 2020, "vancouver", 1),
        (A, 2020, "seattle", 2),
        (A, 2020, "kyiv", 3),
    ]


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        ([(2020, "odessa", 4)], [(A, 2020, "odessa", 4)]),  # unseen
        ([(2020, "seattle", 2), (2020, "kyiv", 3)], []),  # seen_tail_ordered
        ([(2020, "kyiv", 3), (2020, "seattle", 2)], []),  # seen_tail_unordered
        ([(2020, "seattle", 2)], []),  # seen_middle
    ],
)
def test_ledger_against_history(tmp_path: Path, new: list[Any], expected: list[Any]) -> None:
    history = ledger_history(tmp_path, ledger(*LEDGER_PREV))
    assert merged(ledger_merge("year", "city"), history, data(*new)) == expected


@pytest.mark.parametrize(
    ("pk", "new", "expected"),
    [
        (("year",), (2020, "kiev", 3), []),
        (("year", "city"), (2020, "seattle", 3), []),
        (("year", "city", "population"), (2020, "seattle", 3), [(A, 2020, "seattle", 3)]),
        (("year", "city"), (2021, "seattle", 3), [(A, 2021, "seattle", 3)]),
    ],
)
def test_ledger_respects_primary_key(
    tmp_path: Path, pk: tuple[str, ...], new: tuple[Any, ...], expected: list[Any]
) -> None:
    history = ledger_history(tmp_path, ledger((A, 2020, "vancouver", 1), (A, 2020, "seattle", 2)))
    assert merged(ledger_merge(*pk), history, data(new)) == expected


def test_ledger_invalid_primary_key() -> None:
    new = data((2020, "vancouver", 1), (2020, "seattle", 2), (2020, "kyiv", 3))
    with pytest.raises(MergeError, match="primary key column 'foo' is not in the data"):
        ledger_merge("year", "city", "foo").merge(stream(new), History.empty())


def test_ledger_null_keys_never_match_and_batch_duplicates_are_kept(tmp_path: Path) -> None:
    history = ledger_history(tmp_path, ledger((A, 2020, None, 1)))
    new = data((2020, None, 1), (2021, "x", 5), (2021, "x", 5))
    assert merged(ledger_merge("year", "city"), history, new) == [
        (A, 2020, None, 1),
        (A, 2021, "x", 5),
        (A, 2021, "x", 5),
    ]


def test_ledger_streams_batch_by_batch(tmp_path: Path) -> None:
    history = ledger_history(tmp_path, ledger(*LEDGER_PREV))
    new = data(*((2020 + i % 3, f"c{i % 50}", i) for i in range(300)))
    out = ledger_merge("year", "city").merge(stream(new, max_rows=7), history)
    batches = list(out)
    assert len(batches) > 10
    keys = {(r["year"], r["city"]) for b in batches for r in b.to_pylist()}
    assert len(keys) == 150
    assert sum(b.num_rows for b in batches) == 300


# --- Snapshot: projection ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changelog", "state"),
    [
        ([], []),
        (
            [(A, 2020, "vancouver", 1), (A, 2020, "seattle", 2)],
            [(2020, "vancouver", 1), (2020, "seattle", 2)],
        ),
        ([(A, 2020, "vancouver", 1), (R, 2020, "vancouver", 0)], []),
        (
            [(A, 2020, "vancouver", 1), (CF, 2020, "vancouver", 1), (CT, 2020, "vancouver", 2)],
            [(2020, "vancouver", 2)],
        ),
        (
            [
                (A, 2020, "vancouver", 1),
                (A, 2020, "seattle", 2),
                (CF, 2020, "vancouver", 1),
                (CT, 2020, "vancouver", 3),
                (A, 2020, "kyiv", 4),
                (R, 2020, "seattle", 0),
                (CF, 2020, "kyiv", 4),
                (CT, 2020, "kyiv", 1),
            ],
            [(2020, "vancouver", 3), (2020, "kyiv", 1)],
        ),
    ],
    ids=["empty", "append", "append_retract", "correct", "mixed"],
)
def test_snapshot_projection(changelog: list[Any], state: list[Any]) -> None:
    table = ledger(*changelog)
    table = table.add_column(0, "offset", pa.array(range(table.num_rows), pa.int64()))
    projected = snapshot("city").project(table)
    assert sorted(rows(projected, "year", "city", "population")) == sorted(state)


# --- Snapshot: merge ---------------------------------------------------------------------------

SNAPSHOT_PREV = ((A, 2020, "vancouver", 1), (A, 2020, "seattle", 2), (A, 2020, "kyiv", 3))


def without_time(*records: tuple[Any, ...]) -> pa.Table:
    """Input with no event time of its own: the writer adds a NULL ``year`` column."""
    return data(*((None, *r) for r in records))


def test_snapshot_to_empty() -> None:
    new = without_time(("vancouver", 1), ("seattle", 2))
    assert merged(snapshot("city"), History.empty(), new) == [
        (A, None, "seattle", 2),
        (A, None, "vancouver", 1),
    ]


@pytest.mark.parametrize(
    "new", [[("vancouver", 1), ("seattle", 2)], [("seattle", 2), ("vancouver", 1)]]
)
def test_snapshot_no_changes(tmp_path: Path, new: list[Any]) -> None:
    history = ledger_history(tmp_path, ledger((A, 2020, "vancouver", 1), (A, 2020, "seattle", 2)))
    assert merged(snapshot("city"), history, without_time(*new)) == []


def test_snapshot_mix_of_changes(tmp_path: Path) -> None:
    history = ledger_history(tmp_path, ledger(*SNAPSHOT_PREV))
    new = without_time(("seattle", 2), ("kyiv", 4), ("odessa", 5))
    assert merged(snapshot("city"), history, new) == [
        (CF, 2020, "kyiv", 3),
        (CT, None, "kyiv", 4),
        (A, None, "odessa", 5),
        (R, 2020, "vancouver", 1),
    ]


def test_snapshot_input_carries_event_time(tmp_path: Path) -> None:
    history = ledger_history(tmp_path, ledger(*SNAPSHOT_PREV))
    new = data((2020, "seattle", 2), (2021, "kyiv", 3), (2021, "odessa", 5))
    assert merged(snapshot("city"), history, new) == [
        (CF, 2020, "kyiv", 3),
        (CT, 2021, "kyiv", 3),
        (A, 2021, "odessa", 5),
        (R, 2020, "vancouver", 1),
    ]


def test_snapshot_invalid_primary_key() -> None:
    new = without_time(("vancouver", 1), ("seattle", 2))
    with pytest.raises(MergeError, match="'foo'"):
        snapshot("city", "foo").merge(stream(new), History.empty())


def test_snapshot_compare_columns_limit_what_counts_as_a_change(tmp_path: Path) -> None:
    history = ledger_history(tmp_path, ledger(*SNAPSHOT_PREV))
    new = data((2021, "vancouver", 1), (2021, "seattle", 20), (2021, "kyiv", 3))
    assert merged(snapshot("city", compare=("population",)), history, new) == [
        (CF, 2020, "seattle", 2),
        (CT, 2021, "seattle", 20),
    ]
    with pytest.raises(MergeError, match="compare column 'nope'"):
        snapshot("city", compare=("nope",)).merge(stream(new), History.empty())


def test_snapshot_empty_snapshot_retracts_everything(tmp_path: Path) -> None:
    history = ledger_history(tmp_path, ledger(*SNAPSHOT_PREV))
    assert merged(snapshot("city"), history, without_time()) == [
        (R, 2020, "kyiv", 3),
        (R, 2020, "seattle", 2),
        (R, 2020, "vancouver", 1),
    ]


def test_snapshot_keys_appear_and_vanish_even_with_null_compare_values(tmp_path: Path) -> None:
    """The reference misses these (it only sees keys through the compare columns)."""
    history = ledger_history(tmp_path, ledger((A, 2020, "gone", None)))
    new = without_time(("new", None))
    assert merged(snapshot("city"), history, new) == [
        (R, 2020, "gone", None),
        (A, None, "new", None),
    ]


def test_snapshot_null_keys_are_stable(tmp_path: Path) -> None:
    """NULL keys match each other (as the projection groups them): no churn, no value loss."""
    history = ledger_history(tmp_path, ledger((A, 2020, None, 1), (A, 2020, "a", 2)))
    assert merged(snapshot("city"), history, without_time((None, 1), ("a", 2))) == []
    assert merged(snapshot("city"), history, without_time((None, 7), ("a", 2))) == [
        (CF, 2020, None, 1),
        (CT, None, None, 7),
    ]


def test_snapshot_nan_is_not_a_change(tmp_path: Path) -> None:
    schema = pa.schema(
        [("op", pa.int32()), ("year", pa.int64()), ("k", pa.string()), ("v", pa.float64())]
    )
    prev = pa.Table.from_pylist([{"op": A, "year": 2020, "k": "a", "v": float("nan")}], schema)
    history = ledger_history(tmp_path, prev)
    new = pa.Table.from_pylist([{"year": None, "k": "a", "v": float("nan")}], schema.remove(0))
    assert merged(snapshot("k"), history, new) == []
