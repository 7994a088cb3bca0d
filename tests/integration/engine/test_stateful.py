"""Stateful queries across transactions: windows, interval joins, changelogs (issue: stateful
streaming). Every expected output is written by hand from the semantics in
``engine_spark/README.md``: a window is emitted once, when the input watermark passes its end;
records before the input watermark when they arrive are dropped (one at it is on time); an
aggregation without a window is a changelog (+I, then -U/+U when a key's row changes)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary
from engine_spark.checkpoint import Runner, read_checkpoint
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from engine_spark.stateful import window
from tests.integration.engine.datasets import (
    InputDataset,
    OutputDataset,
    at,
    sql,
    validate_request,
)

pytestmark = [pytest.mark.spark]

READINGS = pa.schema([("sensor", pa.string()), ("value", pa.int64())])


def reading(hours: float, sensor: str, value: int, op: int = 0) -> dict[str, Any]:
    return {"event_time": at(hours), "sensor": sensor, "value": value, "op": op}


class Pipeline:
    """One output dataset fed by input datasets, transaction by transaction, in process."""

    def __init__(self, engine: SparkEngine, out: OutputDataset) -> None:
        self.engine = engine
        self.out = out
        self.watermarks: list[Any] = []

    def run(self, *inputs: ep.TransformRequestInput) -> list[dict[str, Any]]:
        request = self.out.request(inputs)
        response = self.engine.execute_transform(request)
        self.out.commit(request, response)
        self.watermarks.append(response.new_watermark)
        if response.new_offset_interval is None:
            return []
        rows = pq.read_table(request.new_data_path).to_pylist()
        for row in rows:
            row.pop("system_time")
        return rows


def over_readings(
    engine: SparkEngine, workdir: Path, name: str, transform: Any, prefix: str = ""
) -> tuple[InputDataset, Pipeline]:
    """The input ``readings`` and a pipeline of the output ``name`` of ``transform`` over it
    (in ``workdir``'s ``{prefix}in`` and ``{prefix}out``)."""
    readings = InputDataset(workdir / f"{prefix}in", "readings", READINGS)
    return readings, Pipeline(engine, OutputDataset(workdir / f"{prefix}out", name, transform))


def window_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["op"], r["event_time"], r["sensor"], r["total"], r["n"]) for r in rows]


TUMBLING = sql(
    "SELECT window.end AS event_time, sensor, sum(value) AS total, count(*) AS n "
    "FROM readings GROUP BY window(event_time, '1 hour'), sensor"
)


def test_tumbling_window_emits_each_window_once_when_the_watermark_passes_it(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings, pipe = over_readings(spark_engine, workdir, "hourly", TUMBLING)

    # tx1: records of hours 0 and 1, watermark inside hour 0: nothing closes.
    readings.append(
        [reading(0.1, "a", 1), reading(1.2, "a", 2), reading(0.5, "b", 3)], watermark=at(0.5)
    )
    assert pipe.run(readings.take()) == []
    # tx2: one late record (before the watermark 0.5: dropped), one in the open hour 0.
    readings.append([reading(0.4, "a", 100), reading(0.7, "a", 10)], watermark=at(0.9))
    assert pipe.run(readings.take()) == []
    # tx3: a watermark alone closes hour 0.
    readings.append([], watermark=at(1.0))
    assert window_rows(pipe.run(readings.take())) == [
        (0, at(1), "a", 11, 2),
        (0, at(1), "b", 3, 1),
    ]
    # tx4: out of order inside hour 1, then the watermark passes hour 1 only.
    readings.append([reading(2.5, "a", 7), reading(1.9, "a", 5)], watermark=at(2.2))
    assert window_rows(pipe.run(readings.take())) == [(0, at(2), "a", 7, 2)]
    # Labelled by their end: the output watermark is the input's (watermark.window_bound).
    assert pipe.watermarks == [at(0.5), at(0.9), at(1.0), at(2.2)]
    # Replay of tx4 from tx3's checkpoint gives the same bytes.
    state = read_checkpoint(pipe.out.prev_checkpoint)
    assert state.stream is not None and state.stream.mode == "append"
    # Recomputed from the records less than a window (1 hour) behind the watermark (2.2):
    # 2.5 and 1.9, in the order they came; every older record is gone.
    assert state.stream.runner == Runner.WINDOW_RECOMPUTE
    [kept] = state.stream.files.values()
    assert pq.read_table(pa.BufferReader(kept)).column("value").to_pylist() == [7, 5]
    assert b"/tmp" not in Path(pipe.out.prev_checkpoint).read_bytes()


def test_windows_labelled_by_their_start_hold_the_output_watermark_at_the_open_ones(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    by_start = sql(
        "SELECT window.start AS event_time, sensor, sum(value) AS total, count(*) AS n "
        "FROM readings GROUP BY window(event_time, '1 hour'), sensor"
    )
    readings, pipe = over_readings(spark_engine, workdir, "hourly", by_start)
    readings.append([reading(0.5, "a", 1), reading(1.5, "a", 2)], watermark=at(1.5))
    # Hour 0 closes, labelled 0:00; hour 1, still open, will be labelled 1:00: the output
    # watermark is 1:00, the start of the earliest window still to come.
    assert window_rows(pipe.run(readings.take())) == [(0, at(0), "a", 1, 1)]
    assert pipe.watermarks == [at(1)]


def test_window_state_of_structured_streaming_carries_on_as_structured_streaming(
    spark_engine: SparkEngine, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dataset whose window state an earlier engine kept as Spark's streaming checkpoint
    goes on with it (the runner is part of the state)."""
    readings, pipe = over_readings(spark_engine, workdir, "hourly", TUMBLING)
    with monkeypatch.context() as patched:
        patched.setattr(window, "window_aggregate", lambda *_: None)
        readings.append([reading(0.1, "a", 1), reading(1.2, "a", 2)], watermark=at(0.5))
        assert pipe.run(readings.take()) == []
    state = read_checkpoint(pipe.out.prev_checkpoint).stream
    assert state is not None and state.runner == Runner.SPARK_STREAMING
    readings.append([reading(0.7, "a", 10)], watermark=at(1.5))
    assert window_rows(pipe.run(readings.take())) == [(0, at(1), "a", 11, 2)]
    state = read_checkpoint(pipe.out.prev_checkpoint).stream
    assert state is not None and state.runner == Runner.SPARK_STREAMING


TOP_TWO = sql(
    "SELECT event_time, sensor, value, rn FROM (SELECT event_time, sensor, value, "
    "row_number() OVER (PARTITION BY sensor ORDER BY value DESC, event_time) AS rn "
    "FROM readings) WHERE rn <= 2"
)


def run_all(engine: SparkEngine, workdir: Path, name: str, transform: Any, rounds: list) -> list:
    """Feed ``rounds`` (each: rows, watermark) through a fresh pipeline; all output rows."""
    readings, pipe = over_readings(engine, workdir, name, transform, prefix=f"{name}-")
    rows: list = []
    for records, watermark in rounds:
        readings.append(records, watermark=watermark)
        rows += pipe.run(readings.take())
    return rows


def test_sliding_window_n_transactions_give_what_one_transaction_gives(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    transform = sql(
        "SELECT window.end AS event_time, sensor, sum(value) AS total, count(*) AS n "
        "FROM readings GROUP BY window(event_time, '2 hours', '1 hour'), sensor"
    )
    records = [
        reading(0.5, "a", 1),
        reading(1.5, "a", 2),
        reading(2.5, "a", 4),
        reading(3.5, "a", 8),
    ]
    split = run_all(
        spark_engine,
        workdir,
        "split",
        transform,
        [(records[:2], at(1.0)), ([records[3], records[2]], at(2.0)), ([], at(4.0))],
    )
    whole = run_all(spark_engine, workdir, "whole", transform, [(records, at(4.0))])
    expected = [
        (0, at(1), "a", 1, 1),  # [-1h, 1h)
        (0, at(2), "a", 3, 2),  # [0h, 2h)
        (0, at(3), "a", 6, 2),  # [1h, 3h)
        (0, at(4), "a", 12, 2),  # [2h, 4h)
    ]
    assert window_rows(whole) == expected
    assert [r[1:] for r in window_rows(split)] == [r[1:] for r in expected]
    assert [r["offset"] for r in split] == [0, 1, 2, 3]


SESSIONS = sql(
    "SELECT session_window.end AS event_time, sensor, sum(value) AS total, count(*) AS n "
    "FROM readings GROUP BY session_window(event_time, '30 minutes'), sensor"
)


def test_session_window_closes_after_the_gap_passes_the_watermark(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    rows = run_all(
        spark_engine,
        workdir,
        "sessions",
        SESSIONS,
        [
            ([reading(0.0, "a", 1), reading(0.25, "a", 2)], at(0.25)),
            # extends the session of tx1 (within 30 minutes of 0.25): nothing closes yet
            ([reading(0.5, "a", 4), reading(2.0, "a", 8)], at(0.75)),
            # the watermark passes 0.5 + 30 min: the first session closes
            ([], at(1.5)),
            ([], at(3.0)),
        ],
    )
    assert window_rows(rows) == [
        (0, at(1.0), "a", 7, 3),
        (0, at(2.5), "a", 8, 1),
    ]


CHANGELOG = sql(
    "SELECT max(event_time) AS event_time, sensor, sum(value) AS total, count(*) AS n "
    "FROM readings GROUP BY sensor"
)


def test_unbounded_aggregate_is_a_changelog_of_inserts_and_update_pairs(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings, pipe = over_readings(spark_engine, workdir, "totals", CHANGELOG)
    readings.append([reading(0, "a", 1), reading(1, "b", 2), reading(2, "a", 3)])
    assert window_rows(pipe.run(readings.take())) == [
        (0, at(2), "a", 4, 2),
        (0, at(1), "b", 2, 1),
    ]
    readings.append([reading(3, "b", 10), reading(4, "c", 5)])
    assert window_rows(pipe.run(readings.take())) == [
        (2, at(1), "b", 2, 1),
        (3, at(3), "b", 12, 2),
        (0, at(4), "c", 5, 1),
    ]
    # Nothing new: nothing emitted.
    readings.append([], watermark=at(5))
    assert pipe.run(readings.take()) == []
    readings.append([reading(6, "a", 0)])
    assert window_rows(pipe.run(readings.take())) == [
        (2, at(2), "a", 4, 2),
        (3, at(6), "a", 4, 3),
    ]


def test_deduplication_by_key_emits_each_key_once(spark_engine: SparkEngine, workdir: Path) -> None:
    transform = sql("SELECT min(event_time) AS event_time, sensor FROM readings GROUP BY sensor")
    rows = run_all(
        spark_engine,
        workdir,
        "dedup",
        transform,
        [
            ([reading(1, "a", 1), reading(2, "a", 1), reading(1, "b", 1)], None),
            ([reading(3, "a", 1), reading(3, "c", 1)], None),
        ],
    )
    assert [(r["op"], r["event_time"], r["sensor"]) for r in rows] == [
        (0, at(1), "a"),
        (0, at(1), "b"),
        (0, at(3), "c"),
    ]


CLICKS = pa.schema([("user", pa.string()), ("ad", pa.string())])
VIEWS = pa.schema([("user", pa.string()), ("page", pa.string())])


def interval_join(kind: str) -> Any:
    sides = f"views v {kind} JOIN clicks c"
    if kind == "INNER, clicks first":
        sides = "clicks c JOIN views v"
    return sql(
        f"SELECT v.event_time, v.user, v.page, c.ad FROM {sides} ON v.user = c.user "
        "AND c.event_time BETWEEN v.event_time AND v.event_time + INTERVAL 1 HOUR"
    )


def join_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["event_time"], r["user"], r["page"], r["ad"]) for r in rows]


@pytest.mark.parametrize("kind", ["INNER", "INNER, clicks first", "LEFT OUTER"])
def test_interval_join_matches_partners_from_earlier_transactions(
    spark_engine: SparkEngine, workdir: Path, kind: str
) -> None:
    views = InputDataset(workdir / "views", "views", VIEWS)
    clicks = InputDataset(workdir / "clicks", "clicks", CLICKS)
    pipe = Pipeline(spark_engine, OutputDataset(workdir / "out", "joined", interval_join(kind)))

    def v(h: float, user: str, page: str) -> dict[str, Any]:
        return {"event_time": at(h), "user": user, "page": page}

    def c(h: float, user: str, ad: str) -> dict[str, Any]:
        return {"event_time": at(h), "user": user, "ad": ad}

    views.append([v(0, "u1", "home"), v(0.5, "u2", "faq")], watermark=at(0.5))
    clicks.append([c(0.1, "u9", "ad0")], watermark=at(0.1))
    assert pipe.run(views.take(), clicks.take()) == []
    # The partner of u1's view arrives a transaction later.
    clicks.append([c(0.75, "u1", "ad1")], watermark=at(0.75))
    views.append([], watermark=at(1.0))
    assert join_rows(pipe.run(views.take(), clicks.take())) == [(at(0), "u1", "home", "ad1")]
    # Both watermarks pass u2's bound (0.5 + 1h): an outer join emits it unmatched.
    clicks.append([c(1.2, "u3", "ad2")], watermark=at(2))
    views.append([], watermark=at(2))
    expected = [(at(0.5), "u2", "faq", None)] if kind == "LEFT OUTER" else []
    assert join_rows(pipe.run(views.take(), clicks.take())) == expected
    # A view may still match a click up to an hour later: the output watermark lags by it,
    # exactly (no engine margin).
    lag = timedelta(hours=1)
    assert pipe.watermarks == [at(0.1) - lag, at(0.75) - lag, at(2) - lag]
    state = read_checkpoint(pipe.out.prev_checkpoint).stream
    assert state is not None
    if kind.startswith("INNER"):
        # Recomputed, whichever side the query names first: the views (kept an hour) are
        # the side whose kept records meet the new clicks in the first query.
        assert state.runner == Runner.JOIN_RECOMPUTE
        assert state.join is not None and (state.join.left, state.join.right) == ("views", "clicks")
    else:
        assert state.runner == Runner.SPARK_STREAMING


def test_right_outer_interval_join_emits_unmatched_right_rows_once_no_partner_can_come(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    views = InputDataset(workdir / "views", "views", VIEWS)
    clicks = InputDataset(workdir / "clicks", "clicks", CLICKS)
    query = sql(
        "SELECT c.event_time, c.user, v.page, c.ad FROM views v RIGHT OUTER JOIN clicks c "
        "ON v.user = c.user AND c.event_time BETWEEN v.event_time "
        "AND v.event_time + INTERVAL 1 HOUR"
    )
    pipe = Pipeline(spark_engine, OutputDataset(workdir / "out", "clicked", query))

    def rows(out: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["event_time"], r["user"], r["page"], r["ad"]) for r in out]

    # u1's click matches at once; u9's click (0.1) can get no view any more (a view at or
    # before 0.1 would be late: views' watermark is 0.5, and the global one 0.2 passed it);
    # u2's click (0.4) waits: the global watermark (0.4) has not passed it.
    views.append([{"event_time": at(0), "user": "u1", "page": "home"}], watermark=at(0.5))
    clicks.append(
        [
            {"event_time": at(0.1), "user": "u9", "ad": "ad0"},
            {"event_time": at(0.2), "user": "u1", "ad": "ad1"},
            {"event_time": at(0.4), "user": "u2", "ad": "ad2"},
        ],
        watermark=at(0.4),
    )
    assert rows(pipe.run(views.take(), clicks.take())) == [
        (at(0.1), "u9", None, "ad0"),
        (at(0.2), "u1", "home", "ad1"),
    ]
    # u1's view of the first transaction matches a new click; u2's click is emitted
    # unmatched once both watermarks pass it; each row exactly once.
    views.append([], watermark=at(1))
    clicks.append([{"event_time": at(0.9), "user": "u1", "ad": "ad3"}], watermark=at(1))
    assert rows(pipe.run(views.take(), clicks.take())) == [
        (at(0.4), "u2", None, "ad2"),
        (at(0.9), "u1", "home", "ad3"),
    ]
    views.append([], watermark=at(3))
    clicks.append([], watermark=at(3))
    assert pipe.run(views.take(), clicks.take()) == []


SYMMETRIC_JOIN = sql(
    "SELECT v.event_time, v.user, v.page, c.ad FROM views v JOIN clicks c ON v.user = c.user "
    "AND c.event_time BETWEEN v.event_time - INTERVAL 1 HOUR AND v.event_time + INTERVAL 1 HOUR"
)


def test_a_join_bounded_both_ways_matches_kept_records_of_either_side(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """Both sides keep records (an hour each way), so a transaction pairs new views with kept
    and new clicks and new clicks with kept views, and never a kept pair again; N
    transactions give what one gives."""

    def v(h: float, user: str, page: str) -> dict[str, Any]:
        return {"event_time": at(h), "user": user, "page": page}

    def c(h: float, user: str, ad: str) -> dict[str, Any]:
        return {"event_time": at(h), "user": user, "ad": ad}

    rounds = [
        ([v(0.0, "u1", "home"), v(0.2, "u2", "faq")], [c(0.5, "u1", "ad1")], at(0.4)),
        # A click for the kept view of u2 and a view for the kept click of u1; a late view.
        ([v(1.0, "u1", "cart"), v(0.3, "u1", "late")], [c(0.9, "u2", "ad2")], at(0.9)),
        # Past u1's first view's bound (0.0 + 1h): a click at 1.5 matches only the view at 1.0.
        ([], [c(1.5, "u1", "ad3")], at(1.6)),
        ([], [], at(5.0)),
    ]

    def run(name: str, batches: list) -> tuple[list[tuple[Any, ...]], Any]:
        views = InputDataset(workdir / f"{name}-views", "views", VIEWS)
        clicks = InputDataset(workdir / f"{name}-clicks", "clicks", CLICKS)
        pipe = Pipeline(spark_engine, OutputDataset(workdir / f"{name}-out", name, SYMMETRIC_JOIN))
        rows: list = []
        for vs, cs, watermark in batches:
            views.append(vs, watermark=watermark)
            clicks.append(cs, watermark=watermark)
            rows += pipe.run(views.take(), clicks.take())
        return join_rows(rows), read_checkpoint(pipe.out.prev_checkpoint).stream

    split, state = run("split", rounds)
    assert state is not None and state.runner == Runner.JOIN_RECOMPUTE
    assert state.join is not None
    # An hour each way, exactly (Spark's 1 ms margin on the inclusive bound taken off).
    assert (state.join.left_lag_us, state.join.right_lag_us) == (3_600_000_000,) * 2
    expected = [
        (at(0.0), "u1", "home", "ad1"),
        (at(0.2), "u2", "faq", "ad2"),
        (at(1.0), "u1", "cart", "ad1"),
        (at(1.0), "u1", "cart", "ad3"),
    ]
    assert sorted(split) == expected
    # All at once (the late view is not late then: it joins too, with ad1).
    whole, _ = run(
        "whole",
        [
            (
                [r for vs, _, _ in rounds for r in vs],
                [r for _, cs, _ in rounds for r in cs],
                at(5.0),
            )
        ],
    )
    assert sorted(whole) == sorted([*expected, (at(0.3), "u1", "late", "ad1")])


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("SELECT event_time, sensor FROM readings ORDER BY value", "ORDER BY over a stream"),
        ("SELECT event_time, sensor FROM readings LIMIT 3", "LIMIT/OFFSET over a stream"),
        (
            "SELECT event_time, sensor, row_number() OVER (PARTITION BY sensor ORDER BY value)"
            " AS r FROM readings",
            "window functions (OVER ...)",
        ),
        (
            "SELECT a.event_time, a.sensor FROM readings a JOIN readings b ON a.sensor = b.sensor",
            "needs an event-time bound",
        ),
        (
            "SELECT max(event_time) AS event_time, sum(value) AS total FROM readings"
            " GROUP BY sensor",
            "select every GROUP BY key",
        ),
    ],
)
def test_queries_that_cannot_run_incrementally_are_refused_at_validation(
    spark_engine: SparkEngine, query: str, reason: str
) -> None:
    with pytest.raises(InvalidQueryError, match=re.escape(reason)):
        spark_engine.validate_query(validate_over_readings(sql(query)))


def validate_over_readings(transform: Any) -> ep.ValidateQueryRequest:
    return validate_request(transform, inputs={"readings": READINGS})


def test_top_n_per_key_is_a_changelog_of_ranks(spark_engine: SparkEngine, workdir: Path) -> None:
    # accepted: a top-N runs incrementally
    spark_engine.validate_query(validate_over_readings(TOP_TWO))
    readings, pipe = over_readings(spark_engine, workdir, "top", TOP_TWO)

    def rows(out: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["op"], r["event_time"], r["sensor"], r["value"], r["rn"]) for r in out]

    readings.append(
        [reading(0.1, "a", 5), reading(0.2, "a", 3), reading(0.3, "b", 1)], watermark=at(0.3)
    )
    assert rows(pipe.run(readings.take())) == [
        (0, at(0.1), "a", 5, 1),
        (0, at(0.2), "a", 3, 2),
        (0, at(0.3), "b", 1, 1),
    ]
    # a's second rank changes hands, b's first moves to its second; a late record (before the
    # watermark 0.3) is dropped, one below the top two changes nothing.
    readings.append(
        [
            reading(0.5, "a", 4),
            reading(0.4, "a", 1),
            reading(0.25, "a", 100),
            reading(0.6, "b", 2),
        ],
        watermark=at(0.6),
    )
    assert rows(pipe.run(readings.take())) == [
        (2, at(0.2), "a", 3, 2),
        (3, at(0.5), "a", 4, 2),
        (2, at(0.3), "b", 1, 1),
        (3, at(0.6), "b", 2, 1),
        (0, at(0.3), "b", 1, 2),
    ]
    readings.append([], watermark=at(1.0))
    assert pipe.run(readings.take()) == []
    state = read_checkpoint(pipe.out.prev_checkpoint).stream
    assert state is not None and state.runner == Runner.TOPN_RECOMPUTE
    assert state.keys == ("sensor", "rn")
    # The state is the top two per key, nothing more.
    [kept] = state.files.values()
    assert sorted(pq.read_table(pa.BufferReader(kept)).column("value").to_pylist()) == [1, 2, 4, 5]


def test_retractions_into_a_stateful_query_are_refused(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings, pipe = over_readings(spark_engine, workdir, "totals", CHANGELOG)
    readings.append([reading(0, "a", 1), reading(0, "a", 1, op=1)])
    with pytest.raises(InvalidQueryError, match=r"'readings' has a retraction .* at offset 1"):
        pipe.run(readings.take())


def test_a_row_wise_query_that_drops_op_refuses_retractions(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings = InputDataset(workdir / "in", "readings", READINGS)
    dropping = Pipeline(
        spark_engine,
        OutputDataset(workdir / "out", "o", sql("SELECT event_time, sensor FROM readings")),
    )
    readings.append([reading(0, "a", 1), reading(0, "a", 1, op=1)])
    with pytest.raises(InvalidQueryError, match="does not select 'op'"):
        dropping.run(readings.take())
    carrying = Pipeline(
        spark_engine,
        OutputDataset(workdir / "out2", "o2", sql("SELECT op, event_time, sensor FROM readings")),
    )
    readings.append([reading(0, "a", 1), reading(0, "a", 1, op=1)])
    assert [r["op"] for r in carrying.run(readings.take())] == [0, 1]


@pytest.mark.parametrize(
    ("transform", "runner"),
    [
        (TUMBLING, Runner.WINDOW_RECOMPUTE),
        (SESSIONS, Runner.SPARK_STREAMING),
        (TOP_TWO, Runner.TOPN_RECOMPUTE),
        (
            sql(
                "SELECT event_time, sensor, value FROM (SELECT *, rank() OVER (PARTITION BY "
                "sensor ORDER BY event_time DESC) AS rn FROM readings) WHERE rn = 1"
            ),
            Runner.RANKED_ROWS,
        ),
        (
            sql(
                "SELECT event_time, sensor, SUM(value) OVER (PARTITION BY sensor "
                "ORDER BY event_time) AS total FROM readings"
            ),
            Runner.RUNNING_AGGREGATE,
        ),
        (sql("SELECT DISTINCT event_time, sensor FROM readings"), Runner.DISTINCT_ROWS),
    ],
)
def test_a_replayed_transaction_writes_the_same_bytes(
    spark_engine: SparkEngine, workdir: Path, transform: Any, runner: str
) -> None:
    readings = InputDataset(workdir / "in", "readings", READINGS)
    out = OutputDataset(workdir / "out", "hourly", transform)
    pipe = Pipeline(spark_engine, out)
    readings.append([reading(0.2, "a", 1), reading(0.4, "b", 2)], watermark=at(0.4))
    pipe.run(readings.take())
    readings.append([reading(0.6, "a", 3), reading(1.5, "b", 4)], watermark=at(1.5))
    entry = readings.take()
    first = out.request([entry], data_suffix="-first")
    again = out.request([entry], data_suffix="-again")
    for request in (first, again):
        response = spark_engine.execute_transform(request)
        assert response.new_offset_interval is not None
    assert Path(first.new_data_path).read_bytes() == Path(again.new_data_path).read_bytes()

    # The retained records are identical; of Spark's checkpoint, its logs are identical, the
    # state store's files are not (RocksDB names its files uniquely), though they hold the
    # same state.
    def logs(path: str) -> dict[str, bytes]:
        stream = read_checkpoint(path).stream
        assert stream is not None and stream.runner == runner
        return {k: v for k, v in stream.files.items() if not k.startswith("state/")}

    assert logs(first.new_checkpoint_path) == logs(again.new_checkpoint_path)
    if runner != Runner.SPARK_STREAMING:
        first_bytes = Path(first.new_checkpoint_path).read_bytes()
        assert first_bytes == Path(again.new_checkpoint_path).read_bytes()


def test_migrate_query_drops_streaming_state_and_keeps_watermarks(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings = InputDataset(workdir / "in", "readings", READINGS)
    out = OutputDataset(workdir / "out", "hourly", TUMBLING)
    pipe = Pipeline(spark_engine, out)
    readings.append([reading(0.2, "a", 1), reading(1.2, "a", 2)], watermark=at(1.2))
    assert window_rows(pipe.run(readings.take())) == [(0, at(1), "a", 1, 1)]
    assert read_checkpoint(out.prev_checkpoint).stream is not None

    daily = sql(
        "SELECT window.end AS event_time, sensor, sum(value) AS total, count(*) AS n "
        "FROM readings GROUP BY window(event_time, '2 hours'), sensor"
    )
    migrate = ep.MigrateQueryRequest(
        dataset_id=out.id,
        dataset_alias=out.name,
        prev_transform=TUMBLING,
        new_transform=daily,
        vocab=DatasetVocabulary(),
        query_inputs=(readings.take(),),
        prev_checkpoint_path=out.prev_checkpoint,
        new_checkpoint_path=str(workdir / "migrated"),
        new_data_path=str(workdir / "migrated-data"),
        system_time=at(2),
        next_offset=out.next_offset,
    )
    response = spark_engine.migrate_query(migrate)
    assert response.new_offset_interval is None
    migrated = read_checkpoint(str(workdir / "migrated"))
    assert migrated.stream is None
    assert list(migrated.input_watermarks.values()) == [at(1.2)]

    # The new query starts from the next records: hour 1's record (1.2) went with the old state.
    out.prev_checkpoint, out.transform = str(workdir / "migrated"), daily
    readings.append([reading(1.5, "a", 10), reading(2.5, "a", 20)], watermark=at(2.5))
    assert window_rows(pipe.run(readings.take())) == [(0, at(2), "a", 10, 1)]


def test_a_stateful_query_is_refused_at_migration(spark_engine: SparkEngine, workdir: Path) -> None:
    readings = InputDataset(workdir / "in", "readings", READINGS)
    readings.append([reading(0.2, "a", 1)], watermark=at(0.2))
    migrate = ep.MigrateQueryRequest(
        dataset_id=readings.id,
        dataset_alias="out",
        prev_transform=TUMBLING,
        new_transform=sql("SELECT event_time, sensor FROM readings LIMIT 1"),
        vocab=DatasetVocabulary(),
        query_inputs=(readings.take(),),
        prev_checkpoint_path=None,
        new_checkpoint_path=str(workdir / "migrated"),
        new_data_path=str(workdir / "migrated-data"),
        system_time=at(2),
        next_offset=0,
    )
    with pytest.raises(InvalidQueryError, match="LIMIT/OFFSET over a stream"):
        spark_engine.migrate_query(migrate)


def test_select_distinct_emits_each_row_once_when_the_watermark_passes_it(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings = InputDataset(workdir / "in", "readings", READINGS)
    distinct = sql("SELECT DISTINCT event_time, sensor FROM readings")
    pipe = Pipeline(spark_engine, OutputDataset(workdir / "out", "distinct", distinct))
    readings.append([reading(1, "a", 1), reading(1, "a", 2), reading(2, "b", 3)], watermark=at(1.5))
    assert [(r["op"], r["event_time"], r["sensor"]) for r in pipe.run(readings.take())] == [
        (0, at(1), "a")
    ]
    readings.append([reading(1, "a", 1), reading(2, "b", 9)], watermark=at(3))
    assert [(r["op"], r["event_time"], r["sensor"]) for r in pipe.run(readings.take())] == [
        (0, at(2), "b")
    ]


TICKS = pa.schema([("currency", pa.string()), ("amount", pa.int64())])
RATES = pa.schema([("currency", pa.string()), ("rate", pa.float64())])
AS_OF = sql(
    (
        "matched",
        "SELECT t.event_time, t.offset AS tick, t.currency, t.amount, r.event_time AS valid_from,"
        " r.rate FROM ticks t JOIN rates r ON t.currency = r.currency"
        " AND r.event_time BETWEEN t.event_time - INTERVAL 1 DAY AND t.event_time",
    ),
    "SELECT event_time, tick, currency, amount * max_by(rate, valid_from) AS usd FROM matched"
    " GROUP BY event_time, tick, currency, amount",
)


def test_an_as_of_join_with_a_bounded_lookback_uses_versions_from_earlier_transactions(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """An event-time as-of join written with the operators above: an interval join to every
    version of the last day, then the newest version per tick. Spark holds the join's output
    watermark back by the lookback (a day), so a tick is emitted once the watermarks pass its
    event time plus a day."""
    ticks = InputDataset(workdir / "ticks", "ticks", TICKS)
    rates = InputDataset(workdir / "rates", "rates", RATES)
    pipe = Pipeline(spark_engine, OutputDataset(workdir / "out", "usd", AS_OF))

    def tick(h: float, currency: str, amount: int) -> dict[str, Any]:
        return {"event_time": at(h), "currency": currency, "amount": amount}

    def rate(h: float, currency: str, value: float) -> dict[str, Any]:
        return {"event_time": at(h), "currency": currency, "rate": value}

    rates.append([rate(0, "EUR", 1.0), rate(0, "GBP", 2.0)], watermark=at(0))
    ticks.append([tick(1, "EUR", 10)], watermark=at(1))
    assert pipe.run(ticks.take(), rates.take()) == []
    # A newer EUR version (valid from 2h) arrives later; the tick at 1h keeps the 0h version.
    rates.append([rate(2, "EUR", 3.0)], watermark=at(3))
    ticks.append([tick(2.5, "EUR", 10), tick(2.5, "GBP", 1)], watermark=at(3))
    assert pipe.run(ticks.take(), rates.take()) == []
    rates.append([], watermark=at(27))
    ticks.append([], watermark=at(27))
    out = pipe.run(ticks.take(), rates.take())
    assert [(r["event_time"], r["currency"], r["usd"]) for r in out] == [
        (at(1), "EUR", 10.0),
        (at(2.5), "EUR", 30.0),
        (at(2.5), "GBP", 2.0),
    ]
