"""The stateful shapes users write (issue 28): the latest row per key, a global top N, running
aggregates per key ordered by event time, SELECT DISTINCT gated by the watermark. Expected
rows are written by hand from ``engine_spark/README.md``: a row is late only when its event
time is less than the watermark, so a running aggregate's row or a distinct row is emitted
once the watermark has passed its event time (a row at the watermark waits); a ranking is a
changelog (+I, -U/+U, -D). Each shape is also run in one transaction and in several: the
gated shapes give the same rows, the rankings the same result once their changelogs are
applied."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine_spark.checkpoint import Runner, read_checkpoint
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql
from tests.integration.engine.test_stateful import (
    READINGS,
    Pipeline,
    reading,
    validate_over_readings,
)

pytestmark = [pytest.mark.spark]

APPEND, RETRACT, CORRECT_FROM, CORRECT_TO = 0, 1, 2, 3


def run_rounds(
    engine: SparkEngine, workdir: Path, name: str, transform: Any, rounds: list, dataset: Any = None
) -> tuple[list[list[dict[str, Any]]], Pipeline]:
    """Feed ``rounds`` (each: rows, watermark) through a fresh pipeline; each round's rows."""
    readings = (dataset or InputDataset)(workdir / f"{name}-in", "readings", READINGS)
    pipe = Pipeline(engine, OutputDataset(workdir / f"{name}-out", name, transform))
    out = []
    for records, watermark in rounds:
        readings.append(records, watermark=watermark)
        out.append(pipe.run(readings.take()))
    return out, pipe


def applied(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> Counter[tuple[Any, ...]]:
    """The result a changelog leaves (a multiset of ``columns``)."""
    result: Counter[tuple[Any, ...]] = Counter()
    for r in rows:
        row = tuple(r[c] for c in columns)
        if r["op"] in (APPEND, CORRECT_TO):
            result[row] += 1
        else:
            assert result[row] > 0, f"retracts a row not in the result: {r}"
            result[row] -= 1
    return +result


def state_runner(pipe: Pipeline) -> str:
    stream = read_checkpoint(pipe.out.prev_checkpoint).stream
    assert stream is not None
    return stream.runner


# --- the latest row per key --------------------------------------------------------------

LATEST = (
    "SELECT event_time, sensor, value FROM (SELECT *, {rank}() OVER (PARTITION BY sensor "
    "ORDER BY event_time DESC, value) AS rn FROM readings) WHERE rn = 1"
)


def latest(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["op"], r["event_time"], r["sensor"], r["value"]) for r in rows]


def test_latest_row_per_key_without_the_rank_is_a_changelog_per_key(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    spark_engine.validate_query(validate_over_readings(sql(LATEST.format(rank="row_number"))))
    rounds = [
        ([reading(1, "a", 1), reading(2, "a", 2), reading(1, "b", 10)], at(1)),
        # a newer a, an older b (not late: at the watermark) that changes nothing, a late c
        ([reading(3, "a", 3), reading(1, "b", 11), reading(0.5, "c", 5)], at(2)),
        ([reading(2.5, "c", 6)], at(3)),
    ]
    out, pipe = run_rounds(
        spark_engine, workdir, "latest", sql(LATEST.format(rank="row_number")), rounds
    )
    assert latest(out[0]) == [(APPEND, at(2), "a", 2), (APPEND, at(1), "b", 10)]
    assert latest(out[1]) == [(CORRECT_FROM, at(2), "a", 2), (CORRECT_TO, at(3), "a", 3)]
    assert latest(out[2]) == [(APPEND, at(2.5), "c", 6)]
    assert state_runner(pipe) == Runner.RANKED_ROWS
    whole, _ = run_rounds(
        spark_engine,
        workdir,
        "latest-whole",
        sql(LATEST.format(rank="row_number")),
        [([r for records, _ in rounds for r in records], at(3))],
    )
    columns = ("event_time", "sensor", "value")
    split = applied([r for rows in out for r in rows], columns)
    # In one transaction the late c (0.5, before no watermark yet) is on time: it is the only
    # difference, and it does not make c's latest row.
    assert applied(whole[0], columns) == split


def test_latest_rows_by_rank_keep_every_tie_and_retract_the_extra_ones(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    transform = sql(
        "SELECT * EXCEPT (rn) FROM (SELECT event_time, sensor, value, rank() OVER "
        "(PARTITION BY sensor ORDER BY event_time DESC) AS rn FROM readings) WHERE rn = 1"
    )
    rounds = [
        ([reading(1, "a", 1)], at(1)),
        ([reading(2, "a", 2), reading(2, "a", 3)], at(2)),  # a tie for the latest
        ([reading(3, "a", 4)], at(3)),  # one row replaces both
    ]
    out, pipe = run_rounds(spark_engine, workdir, "ties", transform, rounds)
    assert latest(out[0]) == [(APPEND, at(1), "a", 1)]
    assert latest(out[1]) == [
        (CORRECT_FROM, at(1), "a", 1),
        (CORRECT_TO, at(2), "a", 2),
        (APPEND, at(2), "a", 3),
    ]
    assert latest(out[2]) == [
        (CORRECT_FROM, at(2), "a", 2),
        (CORRECT_TO, at(3), "a", 4),
        (RETRACT, at(2), "a", 3),
    ]
    assert state_runner(pipe) == Runner.RANKED_ROWS


# --- a global top N ----------------------------------------------------------------------

TOP_THREE = (
    "SELECT event_time, sensor, value{rank} FROM (SELECT event_time, sensor, value, "
    "row_number() OVER (ORDER BY value DESC, event_time) AS rn FROM readings) WHERE rn <= 3"
)


@pytest.mark.parametrize("selected", [True, False], ids=["rank-selected", "rank-not-selected"])
def test_global_top_n_is_a_changelog_and_n_transactions_give_what_one_gives(
    spark_engine: SparkEngine, workdir: Path, selected: bool
) -> None:
    transform = sql(TOP_THREE.format(rank=", rn" if selected else ""))
    records = [reading(h, s, v) for h, s, v in [(1, "a", 5), (2, "b", 7), (3, "c", 1)]]
    more = [reading(h, s, v) for h, s, v in [(4, "d", 6), (5, "e", 0), (6, "f", 9)]]
    name = f"top-{selected}"
    out, pipe = run_rounds(
        spark_engine, workdir, name, transform, [(records, at(3)), (more, at(6))]
    )
    whole, _ = run_rounds(spark_engine, workdir, f"{name}-1", transform, [(records + more, at(6))])
    columns = ("event_time", "sensor", "value", *(("rn",) if selected else ()))
    expected = [(at(6), "f", 9, 1), (at(2), "b", 7, 2), (at(4), "d", 6, 3)]
    assert applied(whole[0], columns) == Counter(r[: len(columns)] for r in expected)
    assert applied(out[0] + out[1], columns) == applied(whole[0], columns)
    assert len(out[0]) == 3 and all(r["op"] == APPEND for r in out[0])
    if selected:  # each rank changes hands: three -U/+U pairs
        assert [r["op"] for r in out[1]] == [CORRECT_FROM, CORRECT_TO] * 3
    else:  # the whole top three is one group: 5 and 1 leave, 9 and 6 enter
        assert sorted(r["value"] for r in out[1] if r["op"] == CORRECT_FROM) == [1, 5]
        assert sorted(r["value"] for r in out[1] if r["op"] == CORRECT_TO) == [6, 9]
    assert state_runner(pipe) == Runner.RANKED_ROWS


# --- running aggregates ------------------------------------------------------------------

RUNNING = sql(
    "SELECT event_time, sensor, value, SUM(value) OVER w AS total, COUNT(*) OVER w AS n, "
    "MIN(value) OVER w AS low, MAX(value) OVER w AS high, AVG(value) OVER w AS mean "
    "FROM readings "
    "WINDOW w AS (PARTITION BY sensor ORDER BY event_time, value ROWS UNBOUNDED PRECEDING)"
)


def running(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (r["op"], r["event_time"], r["sensor"], r["total"], r["n"], r["low"], r["high"], r["mean"])
        for r in rows
    ]


def test_running_aggregates_are_emitted_once_the_watermark_passes_each_row(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    spark_engine.validate_query(validate_over_readings(RUNNING))
    rounds = [
        ([reading(1, "a", 4), reading(2, "a", 2), reading(1.5, "b", 10)], at(2)),
        # a row at the previous watermark is on time; one before it is late
        ([reading(2, "a", 6), reading(1.9, "a", 100), reading(3, "b", 1)], at(2.5)),
        ([], at(4)),
    ]
    out, pipe = run_rounds(spark_engine, workdir, "running", RUNNING, rounds)
    # The watermark 2 has passed 1 and 1.5, not 2: a's row at 2 waits.
    assert running(out[0]) == [
        (APPEND, at(1), "a", 4, 1, 4, 4, 4.0),
        (APPEND, at(1.5), "b", 10, 1, 10, 10, 10.0),
    ]
    # a's two rows at 2 pass the watermark 2.5 together, after the carried row at 1 (4).
    assert running(out[1]) == [
        (APPEND, at(2), "a", 6, 2, 2, 4, 3.0),
        (APPEND, at(2), "a", 12, 3, 2, 6, 4.0),
    ]
    assert running(out[2]) == [(APPEND, at(3), "b", 11, 2, 1, 10, 5.5)]
    assert state_runner(pipe) == Runner.RUNNING_AGGREGATE
    assert pipe.watermarks == [at(2), at(2.5), at(4)]
    records = [r for rows, _ in rounds for r in rows if r["value"] != 100]  # the late one
    whole, _ = run_rounds(spark_engine, workdir, "running-1", RUNNING, [(records, at(4))])
    key = ("event_time", "sensor", "value", "total", "n", "low", "high", "mean")
    split_rows = [r for rows in out for r in rows]
    assert sorted(tuple(r[k] for k in key) for r in whole[0]) == sorted(
        tuple(r[k] for k in key) for r in split_rows
    )


def test_a_running_aggregate_over_the_default_range_frame_with_no_partition(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    transform = sql(
        "SELECT event_time, sensor, total FROM (SELECT event_time, sensor, "
        "SUM(value) OVER (ORDER BY event_time) AS total FROM readings) WHERE total > 2"
    )
    rounds = [
        ([reading(1, "a", 1), reading(1, "b", 2), reading(3, "a", 4)], at(2)),
        ([reading(2, "c", 8)], at(5)),
    ]
    out, _ = run_rounds(spark_engine, workdir, "range", transform, rounds)
    # RANGE: rows at one event time share their value (1 + 2 at 1h); a filter above applies.
    assert [(r["event_time"], r["sensor"], r["total"]) for r in out[0]] == [
        (at(1), "a", 3),
        (at(1), "b", 3),
    ]
    assert [(r["event_time"], r["sensor"], r["total"]) for r in out[1]] == [
        (at(2), "c", 11),
        (at(3), "a", 15),
    ]


NUMBERED = sql(
    "SELECT event_time, sensor, value, row_number() OVER w AS rn, rank() OVER w AS rk, "
    "dense_rank() OVER w AS dr FROM readings "
    "WINDOW w AS (PARTITION BY sensor ORDER BY event_time)"
)


def numbered(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each row without its row number (ties at one event time take theirs in any order),
    then the row numbers per key and event time."""
    numbers: dict[tuple[Any, ...], list[int]] = {}
    for r in rows:
        numbers.setdefault((r["event_time"], r["sensor"]), []).append(r["rn"])
    return [(r["op"], r["event_time"], r["sensor"], r["value"], r["rk"], r["dr"]) for r in rows] + [
        (k, sorted(v)) for k, v in numbers.items()
    ]


def test_running_numbers_per_key_are_emitted_once_the_watermark_passes_each_row(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """row_number(), rank() and dense_rank() per key in event-time order: a row is numbered
    once the watermark has passed it, counting the rows (distinct event times, for the dense
    rank) of its key emitted in earlier transactions; a row at the watermark waits, one at
    the previous watermark is on time, one before it is late."""
    spark_engine.validate_query(validate_over_readings(NUMBERED))
    rounds = [
        ([reading(1, "a", 1), reading(2, "a", 2), reading(1.5, "b", 3)], at(2)),
        ([reading(2, "a", 4), reading(1.9, "a", 100), reading(2.5, "a", 5)], at(3)),
        ([reading(4, "a", 6), reading(3, "b", 7)], at(5)),
    ]
    out, pipe = run_rounds(spark_engine, workdir, "numbered", NUMBERED, rounds)
    assert numbered(out[0]) == [
        (APPEND, at(1), "a", 1, 1, 1),
        (APPEND, at(1.5), "b", 3, 1, 1),
        ((at(1), "a"), [1]),
        ((at(1.5), "b"), [1]),
    ]
    # a's two rows at 2 (one waited, one came at the previous watermark) tie after the row
    # at 1 carried from the first transaction; 1.9 is late.
    assert numbered(out[1]) == [
        (APPEND, at(2), "a", 2, 2, 2),
        (APPEND, at(2), "a", 4, 2, 2),
        (APPEND, at(2.5), "a", 5, 4, 3),
        ((at(2), "a"), [2, 3]),
        ((at(2.5), "a"), [4]),
    ]
    assert numbered(out[2]) == [
        (APPEND, at(3), "b", 7, 2, 2),
        (APPEND, at(4), "a", 6, 5, 4),
        ((at(3), "b"), [2]),
        ((at(4), "a"), [5]),
    ]
    assert state_runner(pipe) == Runner.RUNNING_AGGREGATE
    assert pipe.watermarks == [at(2), at(3), at(5)]
    records = [r for rows, _ in rounds for r in rows if r["value"] != 100]  # the late one
    whole, _ = run_rounds(spark_engine, workdir, "numbered-1", NUMBERED, [(records, at(5))])
    assert sorted(map(str, numbered(whole[0]))) == sorted(
        map(str, numbered([r for rows in out for r in rows]))
    )


# --- SELECT DISTINCT ---------------------------------------------------------------------


@dataclass
class DateReadings(InputDataset):
    """An input whose event time is a DATE."""

    @property
    def schema(self) -> pa.Schema:
        schema = super().schema
        index = schema.get_field_index(self.event_time_column)
        return schema.set(index, pa.field(self.event_time_column, pa.date32()))


def on(day: int, sensor: str, value: int = 0) -> dict[str, Any]:
    return {"event_time": date(2024, 1, day), "sensor": sensor, "value": value, "op": 0}


def midnight(day: int) -> datetime:
    return at(24 * (day - 1))


def test_select_distinct_over_a_date_event_time_waits_for_the_watermark(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    transform = sql("SELECT DISTINCT event_time, sensor FROM readings")
    rounds = [
        ([on(1, "a"), on(1, "a"), on(2, "a")], midnight(1) + (at(12) - at(0))),
        ([on(2, "a"), on(2, "b")], midnight(2)),  # the 2nd at the watermark: waits
        ([on(1, "a"), on(3, "c")], midnight(3)),  # the 1st is late now
        ([], midnight(4)),
    ]
    out, pipe = run_rounds(spark_engine, workdir, "days", transform, rounds, DateReadings)

    def days(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["op"], r["event_time"], r["sensor"]) for r in rows]

    assert days(out[0]) == [(APPEND, date(2024, 1, 1), "a")]
    assert days(out[1]) == []
    assert days(out[2]) == [(APPEND, date(2024, 1, 2), "a"), (APPEND, date(2024, 1, 2), "b")]
    assert days(out[3]) == [(APPEND, date(2024, 1, 3), "c")]
    assert state_runner(pipe) == Runner.DISTINCT_ROWS
    records = [r for rows, _ in rounds for r in rows]
    whole, _ = run_rounds(
        spark_engine, workdir, "days-1", transform, [(records, midnight(4))], DateReadings
    )
    assert sorted(days(whole[0])) == sorted(days(out[0] + out[1] + out[2] + out[3]))


def test_select_distinct_over_a_timestamp_keeps_a_row_at_the_watermark_waiting(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    transform = sql("SELECT DISTINCT event_time, sensor FROM readings")
    rounds = [
        ([reading(1, "a", 1), reading(2, "b", 2)], at(2)),
        ([reading(2, "b", 3)], at(3)),
    ]
    out, pipe = run_rounds(spark_engine, workdir, "distinct", transform, rounds)
    assert [(r["event_time"], r["sensor"]) for r in out[0]] == [(at(1), "a")]
    assert [(r["event_time"], r["sensor"]) for r in out[1]] == [(at(2), "b")]
    assert state_runner(pipe) == Runner.DISTINCT_ROWS


def test_select_distinct_without_event_time_stays_a_changelog_of_inserts(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    transform = sql("SELECT DISTINCT max(event_time) OVER () AS event_time, sensor FROM readings")
    with pytest.raises(InvalidQueryError, match=re.escape("window functions (OVER ...)")):
        run_rounds(spark_engine, workdir, "nodist", transform, [([reading(1, "a", 1)], at(1))])
    transform = sql(
        "SELECT DISTINCT TIMESTAMP '2024-01-01 00:00:00' AS event_time, sensor FROM readings"
    )
    out, pipe = run_rounds(
        spark_engine, workdir, "inserts", transform, [([reading(1, "a", 1)], None)]
    )
    assert [(r["op"], r["sensor"]) for r in out[0]] == [(APPEND, "a")]
    assert state_runner(pipe) == Runner.SPARK_STREAMING


# --- what is still refused ---------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "SELECT event_time, sensor, SUM(value) OVER (PARTITION BY sensor ORDER BY event_time "
        "DESC) AS total FROM readings",
        "SELECT event_time, sensor, SUM(value) OVER (PARTITION BY sensor ORDER BY event_time "
        "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS total FROM readings",
        "SELECT event_time, sensor, lag(value) OVER (PARTITION BY sensor ORDER BY event_time) "
        "AS before FROM readings",
    ],
)
def test_other_window_functions_are_refused_with_the_supported_rewrites(
    spark_engine: SparkEngine, query: str
) -> None:
    with pytest.raises(InvalidQueryError, match="ROWS UNBOUNDED PRECEDING"):
        spark_engine.validate_query(validate_over_readings(sql(query)))


def test_select_distinct_over_the_date_of_a_timestamp_waits_for_the_end_of_the_day(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    transform = sql("SELECT DISTINCT CAST(event_time AS DATE) AS event_time, sensor FROM readings")
    spark_engine.validate_query(validate_over_readings(transform))
    rounds = [
        ([reading(1, "a", 0), reading(5, "a", 0), reading(25, "b", 0)], at(12)),
        ([reading(23, "a", 0), reading(24, "c", 0)], at(24)),  # the 1st's last instant passed
        ([reading(20, "a", 0)], at(48)),  # late
    ]
    out, pipe = run_rounds(spark_engine, workdir, "dates", transform, rounds)

    def days(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["op"], r["event_time"], r["sensor"]) for r in rows]

    assert days(out[0]) == []
    assert days(out[1]) == [(APPEND, date(2024, 1, 1), "a")]
    assert days(out[2]) == [(APPEND, date(2024, 1, 2), "b"), (APPEND, date(2024, 1, 2), "c")]
    # A row dated the watermark's day may still come: the output watermark is that day's start.
    assert pipe.watermarks == [at(0), at(24), at(48)]
    assert state_runner(pipe) == Runner.DISTINCT_ROWS
    records = [r for rows, _ in rounds[:2] for r in rows]
    whole, _ = run_rounds(spark_engine, workdir, "dates-1", transform, [(records, at(48))])
    assert days(whole[0]) == days(out[1] + out[2])
