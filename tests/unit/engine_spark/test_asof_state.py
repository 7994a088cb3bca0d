"""An as-of join's state: which stream rows are released, which versions are kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from engine_spark.stateful.as_of_join.state import horizon, retained_versions, split_released

T0 = datetime(2024, 1, 1, tzinfo=UTC)
TIME = pa.timestamp("us", tz="UTC")


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def versions(*rows: tuple[int, float | None, str, float]) -> pa.Table:
    return pa.table(
        {
            "offset": [r[0] for r in rows],
            "event_time": [at(r[1]) if r[1] is not None else None for r in rows],
            "symbol": [r[2] for r in rows],
            "price": [r[3] for r in rows],
        },
        schema=pa.schema(
            [
                ("offset", pa.int64()),
                ("event_time", TIME),
                ("symbol", pa.string()),
                ("price", pa.float64()),
            ]
        ),
    )


def prices(table: pa.Table) -> list[float]:
    return table.column("price").to_pylist()


def test_rows_wait_until_the_versioned_watermark_passes_them() -> None:
    rows = versions((0, 1, "A", 1), (1, 2, "A", 2), (2, 3, "A", 3), (3, None, "A", 4))
    released, waiting = split_released(rows, "event_time", at(2))
    # At the watermark waits (a version at it is still on time); null never waits.
    assert prices(released) == [1, 4]
    assert prices(waiting) == [2, 3]
    released, waiting = split_released(rows, "event_time", None)
    assert released.num_rows == 0 and waiting.num_rows == 4


def test_the_horizon_is_the_older_watermark_and_needs_both() -> None:
    assert horizon(at(3), at(5)) == at(3)
    assert horizon(at(6), at(5)) == at(5)
    assert horizon(None, at(5)) is None
    assert horizon(at(5), None) is None


def test_kept_versions_are_the_newest_per_key_at_the_horizon_and_all_after_it() -> None:
    table = versions(
        (0, 1, "A", 1),
        (1, 2, "A", 2),
        (2, 2, "A", 3),  # same event time, newer offset: it wins the tie
        (3, 1.5, "A", 4),  # out of order: older event time, newer offset
        (4, 4, "A", 5),  # after the horizon
        (5, 0.5, "B", 6),
        (6, 3.5, "B", 7),
    )
    kept = retained_versions(table, ["symbol"], "event_time", "offset", at(3))
    assert prices(kept) == [3, 5, 6, 7]
    assert kept.column("offset").to_pylist() == [2, 4, 5, 6]  # offset order


def test_without_a_horizon_every_version_is_kept() -> None:
    table = versions((1, 2, "A", 2), (0, 1, "A", 1))
    kept = retained_versions(table, ["symbol"], "event_time", "offset", None)
    assert prices(kept) == [1, 2]


def test_composite_keys_keep_one_version_per_key() -> None:
    table = pa.table(
        {
            "offset": [0, 1, 2, 3],
            "event_time": pa.array([at(1), at(2), at(1), at(2)], TIME),
            "a": ["x", "x", "x", "y"],
            "b": [1, 1, 2, 1],
        }
    )
    kept = retained_versions(table, ["a", "b"], "event_time", "offset", at(5))
    assert kept.column("offset").to_pylist() == [1, 2, 3]
