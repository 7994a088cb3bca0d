"""Lateness and output watermarks at the boundary (issue 28), over several transactions, for
every stateful runner: a record whose event time equals its input's previous watermark is on
time (the watermark promises no events *less than* it), one a microsecond earlier is late;
an output watermark is exact, with no engine margin. Expected outputs are written by hand
from ``engine_spark/README.md``'s semantics table."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary
from common.serde.arrow_schema import encode_arrow_schema
from engine_spark import checkpoint as cp
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from engine_spark.stateful import window
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql
from tests.integration.engine.test_asof_join import as_of, pipeline, price, rows, tick
from tests.integration.engine.test_stateful import (
    READINGS,
    Pipeline,
    reading,
    validate_over_readings,
)

pytestmark = [pytest.mark.spark]

US = timedelta(microseconds=1)
ZERO = timedelta(0)
MS = timedelta(milliseconds=1)


def to_ms(value: datetime) -> datetime:
    """Down to the millisecond (the output's precision)."""
    return value - (value - at(0)) % MS


def runner(pipe: Pipeline) -> cp.Runner:
    state = cp.read_checkpoint(pipe.out.prev_checkpoint).stream
    assert state is not None
    return state.runner


class MicrosecondInput(InputDataset):
    """An input whose event times are in microseconds (the others' are in milliseconds)."""

    @property
    def schema(self) -> pa.Schema:
        schema = super().schema
        index = schema.get_field_index(self.event_time_column)
        return schema.set(index, pa.field(self.event_time_column, pa.timestamp("us", tz="UTC")))


def over_readings(
    engine: SparkEngine, workdir: Path, transform: Any, dataset: type[InputDataset] = InputDataset
) -> tuple[InputDataset, Pipeline]:
    readings = dataset(workdir / "in", "readings", READINGS)
    return readings, Pipeline(engine, OutputDataset(workdir / "out", "out", transform))


def counts(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["event_time"], r["sensor"], r["n"]) for r in rows]


def test_a_record_at_the_previous_watermark_is_counted_in_every_hopping_window(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    hopping = sql(
        "SELECT window.end AS event_time, sensor, count(*) AS n "
        "FROM readings GROUP BY window(event_time, '2 hours', '1 hour'), sensor"
    )
    readings, pipe = over_readings(spark_engine, workdir, hopping)
    readings.append([reading(0.5, "a", 1)], watermark=at(1))
    assert counts(pipe.run(readings.take())) == [(at(1), "a", 1)]  # [-1h, 1h) closed
    readings.append([reading(1, "a", 1)], watermark=at(2))  # at the watermark 1h
    assert counts(pipe.run(readings.take())) == [(at(2), "a", 2)]  # [0h, 2h)
    readings.append([reading(2, "a", 1)], watermark=at(3))  # at the watermark 2h
    assert counts(pipe.run(readings.take())) == [(at(3), "a", 2)]  # [1h, 3h)
    readings.append([], watermark=at(4))
    assert counts(pipe.run(readings.take())) == [(at(4), "a", 1)]  # [2h, 4h)


VIEWS = pa.schema([("user", pa.string()), ("page", pa.string())])
CLICKS = pa.schema([("user", pa.string()), ("ad", pa.string())])


def join(bound: str) -> Any:
    return sql(
        "SELECT v.event_time, v.user, v.page, c.ad FROM views v JOIN clicks c "
        f"ON v.user = c.user AND {bound}"
    )


def v(h: float, user: str) -> dict[str, Any]:
    return {"event_time": at(h), "user": user, "page": "p"}


def c(h: float, user: str, ad: str) -> dict[str, Any]:
    return {"event_time": at(h), "user": user, "ad": ad}


def join_pipeline(
    engine: SparkEngine, workdir: Path, transform: Any, dataset: type[InputDataset] = InputDataset
) -> tuple[InputDataset, InputDataset, Pipeline]:
    views = dataset(workdir / "views", "views", VIEWS)
    clicks = InputDataset(workdir / "clicks", "clicks", CLICKS)
    return views, clicks, Pipeline(engine, OutputDataset(workdir / "out", "joined", transform))


INCLUSIVE = "c.event_time BETWEEN v.event_time AND v.event_time + INTERVAL 1 HOUR"
STRICT = "c.event_time >= v.event_time AND c.event_time < v.event_time + INTERVAL 1 HOUR"


@pytest.mark.parametrize(
    ("bound", "lag"), [(INCLUSIVE, timedelta(hours=1)), (STRICT, timedelta(hours=1) - US)]
)
def test_join_records_at_the_previous_watermark_match_and_the_output_watermark_is_exact(
    spark_engine: SparkEngine, workdir: Path, bound: str, lag: timedelta
) -> None:
    """An inner interval join: an inclusive bound of an hour holds the output watermark back
    by exactly an hour, a strict one by a microsecond less, down to the millisecond (the
    output's rows are written in whole milliseconds)."""
    views, clicks, pipe = join_pipeline(spark_engine, workdir, join(bound))
    views.append([v(0, "u1")], watermark=at(1))
    clicks.append([c(0.5, "u9", "z")], watermark=at(1))
    assert pipe.run(views.take(), clicks.take()) == []
    # Both at their input's watermark (1h): on time. u1's view (0h) still matches a click
    # at 1h under the inclusive bound; u2's view and click meet at 1h.
    views.append([v(1, "u2")], watermark=at(2))
    clicks.append([c(1, "u1", "x"), c(1, "u2", "y")], watermark=at(2))
    rows = [(r["event_time"], r["user"], r["ad"]) for r in pipe.run(views.take(), clicks.take())]
    matches = [(at(1), "u2", "y")]
    assert rows == ([(at(0), "u1", "x")] if bound == INCLUSIVE else []) + matches
    assert pipe.watermarks == [to_ms(at(1) - lag), to_ms(at(2) - lag)] == [at(0), at(1)]
    assert runner(pipe) == cp.Runner.JOIN_RECOMPUTE


def test_an_as_of_join_waits_for_a_version_at_its_own_event_time(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """A tick exactly at the versioned input's watermark is not released: a version at that
    time is still on time, and it is the one the tick must use."""
    prices, ticks, pipe = pipeline(spark_engine, workdir, "asof", as_of())
    prices.append([price(0, "A", 10)], watermark=at(1))
    ticks.append([tick(1, "A", 1)], watermark=at(1))
    assert pipe.run(prices.take(), ticks.take()) == []  # the tick at 1h waits
    # Both at their input's watermark (1h): on time.
    prices.append([price(1, "A", 30)], watermark=at(2))
    ticks.append([tick(1, "A", 2)], watermark=at(2))
    assert rows(pipe.run(prices.take(), ticks.take())) == [("A", 1, 30.0), ("A", 2, 30.0)]
    assert runner(pipe) == cp.Runner.ASOF_JOIN


def test_top_n_distinct_and_changelog_take_records_at_the_previous_watermark(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    queries = {
        "top": (
            sql(
                "SELECT event_time, sensor, value, rn FROM (SELECT *, row_number() OVER "
                "(PARTITION BY sensor ORDER BY value DESC) AS rn FROM readings) WHERE rn <= 1"
            ),
            cp.Runner.TOPN_RECOMPUTE,
        ),
        "totals": (
            sql(
                "SELECT max(event_time) AS event_time, sensor, sum(value) AS value "
                "FROM readings GROUP BY sensor"
            ),
            cp.Runner.SPARK_STREAMING,
        ),
    }
    outputs = {}
    for name, (transform, used) in queries.items():
        readings, pipe = over_readings(spark_engine, workdir / name, transform)
        readings.append([reading(1, "a", 1)], watermark=at(1))
        first = pipe.run(readings.take())
        # At the watermark (1h): on time; before it: late.
        readings.append([reading(1, "b", 5), reading(0.5, "c", 9)], watermark=at(3))
        second = pipe.run(readings.take())
        outputs[name] = [
            [(r["op"], r["event_time"], r["sensor"]) for r in rows] for rows in (first, second)
        ]
        assert runner(pipe) == used, name
    assert outputs["top"] == [[(0, at(1), "a")], [(0, at(1), "b")]]
    assert outputs["totals"] == [[(0, at(1), "a")], [(0, at(1), "b")]]


# --- The Structured Streaming runner (streaming.py): Spark's `<=` comparisons in whole ---
# --- milliseconds made to follow the ODF rules (watermark.spark_*_watermark) ------------


def events(rows: list[dict[str, Any]], *names: str) -> list[tuple[Any, ...]]:
    return [tuple(r[n] for n in names) for r in rows]


@pytest.mark.parametrize(
    ("label", "slide", "used", "bounds"),
    [
        # the output watermark at input watermarks 2h and 24h: the start of the earliest
        # window still to come (labelled by start), the input watermark (by end)
        ("end", "", cp.Runner.WINDOW_RECOMPUTE, (2, 24)),
        ("start", "", cp.Runner.WINDOW_RECOMPUTE, (0, 24)),
        ("end", "", cp.Runner.SPARK_STREAMING, (2, 24)),
        ("start", "", cp.Runner.SPARK_STREAMING, (0, 24)),
        ("end", ", '12 hours'", cp.Runner.SPARK_STREAMING, (2, 24)),
        ("start", ", '12 hours'", cp.Runner.SPARK_STREAMING, (-12, 12)),
    ],
    ids=[
        "tumbling-end",
        "tumbling-start",
        "streaming-tumbling-end",
        "streaming-tumbling-start",
        "streaming-hopping-end",
        "streaming-hopping-start",
    ],
)
def test_a_record_at_the_previous_watermark_is_counted_in_its_daily_window(
    spark_engine: SparkEngine,
    workdir: Path,
    label: str,
    slide: str,
    used: str,
    bounds: tuple[int, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A record at the previous watermark is counted, one a microsecond earlier is not; a
    window closes in the transaction whose watermark reaches its end; the output watermark
    is the earliest event time a window still to come can carry (``watermark.window_bound``).
    Recomputed, and on the streaming runner (as a carried-on Spark state runs them)."""
    query = (
        f"SELECT window.{label} AS event_time, sensor, count(*) AS n "
        f"FROM readings GROUP BY window(event_time, '1 day'{slide}), sensor"
    )
    readings, pipe = over_readings(spark_engine, workdir, sql(query))
    with monkeypatch.context() as patched:  # the first transaction chooses the runner
        if used == cp.Runner.SPARK_STREAMING:
            patched.setattr(window, "window_aggregate", lambda *_: None)
        readings.append([reading(1, "a", 1)], watermark=at(2))
        assert pipe.run(readings.take()) == []
    readings.append([reading(2, "a", 1), reading(2 - US / timedelta(hours=1), "a", 1)])
    assert pipe.run(readings.take()) == []
    readings.append([reading(2, "a", 1)], watermark=at(24))
    day = at(24) if label == "end" else at(0)
    assert counts(pipe.run(readings.take()))[-1] == (day, "a", 3)
    first, last = at(bounds[0]), at(bounds[1])
    assert pipe.watermarks == [first, first, last]
    assert runner(pipe) == used


SESSIONS_BY_START = sql(
    "SELECT session_window.start AS event_time, sensor, count(*) AS n "
    "FROM readings GROUP BY session_window(event_time, '30 minutes'), sensor"
)
SESSIONS = sql(
    "SELECT session_window.end AS event_time, sensor, count(*) AS n "
    "FROM readings GROUP BY session_window(event_time, '30 minutes'), sensor"
)


def test_a_session_takes_a_record_at_the_previous_watermark(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings, pipe = over_readings(spark_engine, workdir, SESSIONS)
    readings.append([reading(1.75, "a", 1)], watermark=at(2))
    assert pipe.run(readings.take()) == []  # [1:45, 2:15) still open
    # At the watermark (2h): on time, extends a's session; before it: late, no session for c.
    readings.append([reading(2, "a", 1), reading(2 - US / timedelta(hours=1), "c", 1)])
    assert pipe.run(readings.take()) == []
    # a's session [1:45, 2:30) still takes a record at 2:30 (Spark merges touching
    # sessions), which is on time at the watermark 2:30: it closes once the watermark is past
    readings.append([], watermark=at(2.5))
    assert counts(pipe.run(readings.take())) == []
    readings.append([reading(2.5, "a", 1)], watermark=at(4))
    assert counts(pipe.run(readings.take())) == [(at(3), "a", 3)]
    # Spark evicts in whole milliseconds, but no session ends off one (whole-millisecond
    # records and gap; the one off it was late): the output watermark is exact
    assert pipe.watermarks == [at(2), at(2), at(2.5), at(4)]
    assert runner(pipe) == cp.Runner.SPARK_STREAMING


def test_a_session_labelled_by_its_start_holds_the_output_watermark_at_the_open_session(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings, pipe = over_readings(spark_engine, workdir, SESSIONS_BY_START)
    emitted = []
    for records, watermark in [
        ([reading(1.75, "a", 1), reading(0.5, "c", 1)], at(2)),
        ([reading(2, "a", 1), reading(2.2, "b", 1)], at(2.4)),  # a: [1:45, 2:30) open
        ([], at(3)),
    ]:
        readings.append(records, watermark=watermark)
        emitted.append(counts(pipe.run(readings.take())))
    assert emitted == [[(at(0.5), "c", 1)], [], [(at(1.75), "a", 2), (at(2.2), "b", 1)]]
    # held at the oldest open session's start, then at the watermark once none is open
    assert pipe.watermarks == [at(1.75), at(1.75), at(3)]
    assert runner(pipe) == cp.Runner.SPARK_STREAMING


def test_an_outer_join_matches_records_at_the_previous_watermark(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """A left outer interval join (the streaming runner): a view and a click at their
    inputs' previous watermark (1h) match (u1's view at 0h under the inclusive bound, u2's at
    1h); u3's view a microsecond before it is late; u1 is not given up as unmatched. The
    output watermark lags by the bound, exactly."""
    outer = sql(
        "SELECT v.event_time, v.user, v.page, c.ad FROM views v LEFT JOIN clicks c "
        f"ON v.user = c.user AND {INCLUSIVE}"
    )
    views, clicks, pipe = join_pipeline(spark_engine, workdir, outer)
    views.append([v(0, "u1")], watermark=at(1))
    clicks.append([c(0.5, "u9", "z")], watermark=at(1))
    assert pipe.run(views.take(), clicks.take()) == []
    views.append([v(1, "u2"), v(1 - US / timedelta(hours=1), "u3"), v(1.5, "u4")], watermark=at(2))
    clicks.append([c(1, "u1", "x"), c(1, "u2", "y")], watermark=at(2))
    joined = events(pipe.run(views.take(), clicks.take()), "event_time", "user", "ad")
    assert joined == [(at(0), "u1", "x"), (at(1), "u2", "y")]
    views.append([], watermark=at(3))
    clicks.append([], watermark=at(3))
    assert events(pipe.run(views.take(), clicks.take()), "event_time", "user", "ad") == [
        (at(1.5), "u4", None)  # no click can come for it any more (clicks at 2:30 are late)
    ]
    assert pipe.watermarks == [at(0), at(1), at(2)]
    assert runner(pipe) == cp.Runner.SPARK_STREAMING


@pytest.mark.parametrize(
    ("query", "used", "margin"),
    [
        (
            "SELECT event_time, sensor, count(*) AS n FROM readings GROUP BY event_time, sensor",
            cp.Runner.SPARK_STREAMING,
            ZERO,
        ),
        ("SELECT DISTINCT event_time, sensor FROM readings", cp.Runner.DISTINCT_ROWS, ZERO),
    ],
    ids=["group-by-event-time", "distinct"],
)
def test_a_key_at_the_watermark_stays_open_until_the_watermark_passes_it(
    spark_engine: SparkEngine, workdir: Path, query: str, used: cp.Runner, margin: timedelta
) -> None:
    """Keyed by the event time itself: the key at the watermark (2h) is not emitted (a record
    at 2h is still on time, and it comes); the key a millisecond below is. Spark evicts in
    whole milliseconds, which loses nothing when no key is off one (the key a microsecond
    below the watermark is late): the output watermark is exact under both runners."""
    readings, pipe = over_readings(spark_engine, workdir, sql(query))
    readings.append(
        [reading(2, "b", 1), reading(2 - MS / timedelta(hours=1), "a", 1)], watermark=at(2)
    )
    assert events(pipe.run(readings.take()), "event_time", "sensor") == [(at(2) - MS, "a")]
    readings.append(
        [reading(2, "b", 1), reading(2 - US / timedelta(hours=1), "c", 1)], watermark=at(5)
    )
    rows = pipe.run(readings.take())
    assert events(rows, "event_time", "sensor") == [(at(2), "b")]
    if "count" in query:
        assert rows[0]["n"] == 2
    assert pipe.watermarks == [at(2) - margin, at(5) - margin]
    assert runner(pipe) == used


def test_a_key_off_a_whole_millisecond_holds_the_streaming_output_watermark_until_evicted(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """Under Structured Streaming a key between Spark's eviction watermark (the last whole
    millisecond below the watermark) and the watermark is final but still held, so it comes
    a transaction late: while such a key may be held, the output watermark is the first
    microsecond after Spark's eviction watermark (``watermark.spark_output_margin``), which
    the late row never precedes; once Spark evicts it, the output watermark is exact."""
    query = "SELECT event_time, sensor, count(*) AS n FROM readings GROUP BY event_time, sensor"
    readings, pipe = over_readings(spark_engine, workdir, sql(query), MicrosecondInput)
    off = at(2) + MS / 2
    a = {**reading(2, "a", 1), "event_time": off}  # on time, after the watermark
    readings.append([a, reading(1, "b", 1)], watermark=at(2))
    assert events(pipe.run(readings.take()), "event_time", "sensor") == [(at(1), "b")]
    readings.append([], watermark=at(2) + MS)  # a's key is final, but Spark holds it
    assert pipe.run(readings.take()) == []
    readings.append([], watermark=at(3))
    # (written in whole milliseconds, as every output row, and so is the output watermark)
    assert events(pipe.run(readings.take()), "event_time", "sensor") == [(at(2), "a")]
    assert pipe.watermarks == [at(2) - MS, at(2), at(3)]
    assert runner(pipe) == cp.Runner.SPARK_STREAMING


def test_a_window_above_a_join_closes_by_sparks_join_watermark_and_the_output_follows(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """Hourly windows (labelled by their start) over a left outer join bounded by an hour:
    Spark closes them by the join's state watermark, a millisecond short of the exact bound
    (the harvested flink-interval-join-then-window-unmatched case), so the hour before the
    bound closes a transaction later; the output watermark is the start of the earliest
    window Spark still holds, so no row emitted later precedes it."""
    counted = sql(
        "SELECT window.start AS event_time, count(*) AS n FROM (SELECT v.event_time, v.user "
        f"FROM views v LEFT JOIN clicks c ON v.user = c.user AND {INCLUSIVE}) "
        "GROUP BY window(event_time, '1 hour')"
    )
    views, clicks, pipe = join_pipeline(spark_engine, workdir, counted)
    emitted = []
    for view_rows, click_rows, watermark in [
        ([v(0.5, "u1"), v(1, "u2")], [c(0.75, "u1", "x")], at(2)),
        ([], [], at(3)),
        ([], [], at(4)),
    ]:
        views.append(view_rows, watermark=watermark)
        clicks.append(click_rows, watermark=watermark)
        emitted.append(events(pipe.run(views.take(), clicks.take()), "event_time", "n"))
    assert emitted == [[], [(at(0), 1)], [(at(1), 1)]]
    assert pipe.watermarks == [at(0), at(1), at(2)]
    assert runner(pipe) == cp.Runner.SPARK_STREAMING


def test_an_outer_join_row_off_a_whole_millisecond_holds_the_output_watermark_back(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """A left outer join: a view off a whole millisecond, final once the watermark is an
    hour past it, stays in Spark's state until Spark's join watermark (whole milliseconds,
    less a millisecond for the inclusive bound) passes it, and is emitted unmatched a
    transaction late; meanwhile the output watermark is the first microsecond after Spark's,
    which the late row does not precede. Whole-millisecond rows keep it exact."""
    outer = sql(
        "SELECT v.event_time, v.user, c.ad FROM views v LEFT JOIN clicks c "
        f"ON v.user = c.user AND {INCLUSIVE}"
    )
    views, clicks, pipe = join_pipeline(spark_engine, workdir, outer, MicrosecondInput)
    off = at(1) + MS / 2
    emitted = []
    for view_rows, watermark in [
        ([{**v(1, "u1"), "event_time": off}], at(2)),
        ([], at(2) + MS),  # u1 is final: clicks from 2:00:00.001 on are too late for it
        ([], at(3)),
    ]:
        views.append(view_rows, watermark=watermark)
        clicks.append([c(0.5, "u9", "z")] if watermark == at(2) else [], watermark=watermark)
        emitted.append(events(pipe.run(views.take(), clicks.take()), "event_time", "user"))
    # (written in whole milliseconds, as every output row, and so is the output watermark)
    assert emitted == [[], [], [(at(1), "u1")]]
    assert pipe.watermarks == [at(1) - MS, at(1), at(2)]
    assert runner(pipe) == cp.Runner.SPARK_STREAMING


# --- Inputs whose event-time column has another name (issue 34, item 1) -------------------

BY_NAME = {
    "tumbling": "SELECT window.start AS event_time, sensor, sum(value) AS total "
    "FROM readings GROUP BY window({t}, '1 hour'), sensor",
    "session": "SELECT session_window.end AS event_time, sensor, count(*) AS total "
    "FROM readings GROUP BY session_window({t}, '30 minutes'), sensor",
    "changelog": "SELECT max({t}) AS event_time, sensor, sum(value) AS total "
    "FROM readings GROUP BY sensor",
    "top": "SELECT {t} AS event_time, sensor, value AS total, rn FROM (SELECT *, row_number() "
    "OVER (PARTITION BY sensor ORDER BY value DESC) AS rn FROM readings) WHERE rn <= 1",
    "join": "SELECT r.{t} AS event_time, r.sensor, o.value AS total FROM readings r "
    "JOIN others o ON r.sensor = o.sensor "
    "AND o.{t} BETWEEN r.{t} AND r.{t} + INTERVAL 1 HOUR",
}


def run_named(engine: SparkEngine, workdir: Path, query: str, column: str) -> list[Any]:
    transform = sql(BY_NAME[query].format(t=column))
    aliases = ["readings", "others"] if query == "join" else ["readings"]
    inputs = [InputDataset(workdir / a, a, READINGS, event_time_column=column) for a in aliases]
    request = ep.ValidateQueryRequest(
        dataset_alias="out",
        vocab=DatasetVocabulary(),
        transform=transform,
        query_inputs=tuple(
            ep.ValidateQueryInput(
                query_alias=i.name,
                schema=encode_arrow_schema(i.schema),
                vocab=DatasetVocabulary(event_time_column=column),
            )
            for i in inputs
        ),
    )
    engine.validate_query(request)
    pipe = Pipeline(engine, OutputDataset(workdir / "out", "out", transform))
    out = []
    rounds = [
        ([reading(0.1, "a", 1), reading(0.5, "b", 2)], at(0.5)),
        ([reading(0.5, "a", 3), reading(0.2, "a", 9), reading(1.5, "a", 4)], at(1.2)),
        ([reading(2, "b", 5)], at(3)),
    ]
    for records, watermark in rounds:
        for i in inputs:
            i.append(records, watermark=watermark)
        out.append(pipe.run(*(i.take() for i in inputs)))
    return [out, pipe.watermarks, runner(pipe)]


@pytest.mark.parametrize("query", sorted(BY_NAME))
def test_an_event_time_column_of_any_name_gives_the_results_of_event_time(
    spark_engine: SparkEngine, workdir: Path, query: str
) -> None:
    named = run_named(spark_engine, workdir / "ts", query, "ts")
    assert named == run_named(spark_engine, workdir / "event_time", query, "event_time")
    assert any(named[0])


def test_a_refused_aggregation_names_the_event_time_column_rule(spark_engine: SparkEngine) -> None:
    transform = sql(
        "SELECT max(event_time) AS event_time, sensor, count(*) AS n FROM readings "
        "GROUP BY sensor, value"
    )
    with pytest.raises(InvalidQueryError, match="grouped neither by a window of an input's"):
        spark_engine.validate_query(validate_over_readings(transform))
