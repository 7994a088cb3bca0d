"""Which window aggregations and top-N queries are recomputed from kept records
(``stateful/window.py``, ``stateful/top_n.py``), and that the restricted plan computes
exactly the windows that close."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from engine_spark.engine import SparkEngine
from engine_spark.inputs import register_view
from engine_spark.session import request_session
from engine_spark.stateful.retention import retained
from engine_spark.stateful.top_n import top_n
from engine_spark.stateful.window import closing_windows, window_aggregate

pytestmark = [pytest.mark.spark]

T0 = datetime(2024, 1, 1, tzinfo=UTC)
INPUTS = frozenset({"readings", "other"})


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def session(spark_engine: SparkEngine) -> SparkSession:
    session = request_session(spark_engine.session)
    rows = [(at(0.5), "a", 1), (at(1.5), "a", 2), (at(2.5), "b", 4), (at(3.5), "a", 8)]
    for name in ("readings", "other"):
        df = session.createDataFrame(rows, "event_time timestamp, sensor string, value bigint")
        register_view(df, name)
    return session


@pytest.mark.parametrize(
    ("query", "width", "lag"),
    [
        (
            "SELECT window.end AS event_time, sensor, sum(value) AS total FROM readings "
            "GROUP BY window(event_time, '1 minute'), sensor",
            timedelta(minutes=1),
            timedelta(0),  # labelled by its end: nothing still to come is behind
        ),
        (
            "SELECT window.start AS event_time, count(*) AS n FROM readings "
            "GROUP BY window(event_time, '10 minutes', '5 minutes') HAVING count(*) > 1",
            timedelta(minutes=10),
            timedelta(minutes=10),  # labelled by its start: up to a width behind
        ),
        (
            "SELECT w.end AS event_time, sensor, max(value) AS top FROM ("
            "SELECT window(event_time, '2 minutes') AS w, sensor, value FROM readings "
            "WHERE value > 1) GROUP BY w, sensor",
            timedelta(minutes=2),
            timedelta(0),
        ),
    ],
)
def test_tumbling_and_sliding_windows_over_an_input_are_recomputed(
    session: SparkSession, query: str, width: timedelta, lag: timedelta
) -> None:
    plan = window_aggregate(session.sql(query), "event_time", INPUTS, "event_time")
    assert plan is not None and (plan.width, plan.lag) == (width, lag)


@pytest.mark.parametrize(
    "query",
    [
        # A session window's extent depends on the data.
        "SELECT session_window.end AS event_time, count(*) AS n FROM readings "
        "GROUP BY session_window(event_time, '1 minute')",
        # Windows over a computed time: retention by the input's event time would be wrong.
        "SELECT window.end AS event_time, count(*) AS n FROM readings "
        "GROUP BY window(event_time + INTERVAL 1 HOUR, '1 minute')",
        "SELECT window.end AS event_time, count(*) AS n FROM ("
        "SELECT event_time - INTERVAL 1 HOUR AS event_time FROM readings) "
        "GROUP BY window(event_time, '1 minute')",
        # Two inputs, two aggregations, a join: Structured Streaming's business.
        "SELECT window.end AS event_time, count(*) AS n FROM ("
        "SELECT * FROM readings UNION ALL SELECT * FROM other) "
        "GROUP BY window(event_time, '1 minute')",
        "SELECT max(n) AS n, event_time FROM (SELECT window.end AS event_time, count(*) AS n "
        "FROM readings GROUP BY window(event_time, '1 minute'), sensor) GROUP BY event_time",
        "SELECT window.end AS event_time, count(*) AS n FROM readings r JOIN other o "
        "ON r.sensor = o.sensor AND r.event_time = o.event_time "
        "GROUP BY window(r.event_time, '1 minute')",
        "SELECT sensor, count(*) AS n FROM readings GROUP BY sensor",
    ],
)
def test_other_stateful_queries_are_not_recomputed(session: SparkSession, query: str) -> None:
    assert window_aggregate(session.sql(query), "event_time", INPUTS, "event_time") is None


def test_a_step_view_that_keeps_event_time_is_still_an_input_column(
    session: SparkSession,
) -> None:
    session.sql("SELECT * FROM readings WHERE value < 8").createOrReplaceTempView("kept")
    query = (
        "SELECT window.end AS event_time, count(*) AS n FROM kept "
        "GROUP BY window(event_time, '1 minute')"
    )
    assert window_aggregate(session.sql(query), "event_time", INPUTS, "event_time") is not None
    session.sql(
        "SELECT event_time + INTERVAL 1 MINUTE AS event_time FROM readings"
    ).createOrReplaceTempView("moved")
    moved = query.replace("FROM kept", "FROM moved")
    assert window_aggregate(session.sql(moved), "event_time", INPUTS, "event_time") is None


def test_only_the_windows_that_close_are_computed(session: SparkSession) -> None:
    result = session.sql(
        "SELECT window.end AS event_time, count(*) AS n, sum(value) AS total FROM readings "
        "GROUP BY window(event_time, '2 minutes', '1 minute')"
    )
    plan = window_aggregate(result, "event_time", INPUTS, "event_time")
    assert plan is not None
    rows = closing_windows(result, plan, after=at(1), upto=at(3)).orderBy("event_time").collect()
    # Windows ending at 2 ([0, 2): 0.5 and 1.5) and 3 ([1, 3): 1.5 and 2.5); the window
    # ending at 1 closed before, the ones ending at 4 and 5 are still open.
    assert [(r.event_time.replace(tzinfo=UTC), r.n, r.total) for r in rows] == [
        (at(2), 2, 3),
        (at(3), 2, 6),
    ]


def test_retained_records_are_those_of_windows_still_open() -> None:
    records = pa.table(
        {
            "event_time": pa.array([at(0.5), None, at(2.0), at(2.5)], pa.timestamp("us", "UTC")),
            "value": [1, 2, 3, 4],
        }
    )
    # A window of a minute: records less than a minute behind the watermark.
    kept = retained(records, "event_time", at(3), timedelta(minutes=1) - timedelta(microseconds=1))
    assert kept.column("value").to_pylist() == [4]
    # A join's bound of a minute: a record a minute behind may still match one at at(3).
    kept = retained(records, "event_time", at(3), timedelta(minutes=1))
    assert kept.column("value").to_pylist() == [3, 4]


TOP = (
    "SELECT event_time, sensor AS s, value, rn AS position FROM (SELECT *, row_number() "
    "OVER (PARTITION BY sensor ORDER BY value DESC) AS rn FROM readings) WHERE rn <= 3"
)


def test_a_top_n_per_key_is_recomputed_keyed_by_its_partition_and_rank(
    session: SparkSession,
) -> None:
    plan = top_n(session.sql(TOP), INPUTS)
    assert plan is not None
    assert (plan.limit, plan.input, plan.keys) == (3, "readings", ("s", "position"))
    one = TOP.replace("WHERE rn <= 3", "WHERE rn = 1")
    plan = top_n(session.sql(one), INPUTS)
    assert plan is not None and plan.limit == 1


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("row_number()", "rank()"),  # ties share a rank: a rank may empty again
        ("WHERE rn <= 3", "WHERE rn > 3"),
        ("WHERE rn <= 3", "WHERE rn <= 3 AND value > 1"),  # a rank may empty again
        ("rn AS position FROM", "value AS v2 FROM"),  # the rank is not selected
        ("PARTITION BY sensor", "PARTITION BY upper(sensor)"),
        ("FROM readings)", "FROM (SELECT * FROM readings UNION ALL SELECT * FROM other))"),
    ],
)
def test_other_window_functions_are_not_recomputed(
    session: SparkSession, old: str, new: str
) -> None:
    query = TOP.replace(old, new)
    assert query != TOP
    assert top_n(session.sql(query), INPUTS) is None
