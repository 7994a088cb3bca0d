"""The as-of join's equi-join rewrite (``stateful/as_of_join/plan.py``) gives exactly the rows
Spark's own plan of the lateral subquery gives, over random versions with equal event
times (ties broken by offset), null keys and null times, for inner and left joins; and a
form it cannot express keeps Spark's plan."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from common.odf.fragments import DatasetVocabulary
from engine_spark.engine import SparkEngine
from engine_spark.inputs import register_view
from engine_spark.session import request_session
from engine_spark.stateful.as_of_join.plan import equi_join_plan

pytestmark = [pytest.mark.spark]

VIEWS = frozenset({"ticks", "prices"})
START = datetime(2024, 1, 1)


def _time(rng: random.Random) -> datetime | None:
    return None if rng.random() < 0.05 else START + timedelta(minutes=rng.randrange(40))


def _key(rng: random.Random) -> str | None:
    return None if rng.random() < 0.05 else f"K{rng.randrange(6)}"


@pytest.fixture(scope="module")
def session(spark_engine: SparkEngine) -> SparkSession:
    session = request_session(spark_engine.session)
    rng = random.Random(7)
    prices = [(i, _time(rng), _key(rng), float(rng.randrange(100))) for i in range(300)]
    ticks = [(i, _time(rng), _key(rng), rng.randrange(10)) for i in range(200)]
    register_view(
        session.createDataFrame(
            prices, "offset bigint, event_time timestamp, symbol string, price double"
        ),
        "prices",
    )
    register_view(
        session.createDataFrame(
            ticks, "offset bigint, event_time timestamp, symbol string, qty int"
        ),
        "ticks",
    )
    return session


def _query(join: str, key: str = "t.symbol", columns: str = "p.*") -> str:
    on = " ON true" if join == "LEFT JOIN" else ""
    return (
        "SELECT t.event_time, t.symbol, t.qty, v.price, v.offset AS version "
        f"FROM ticks AS t {join} LATERAL (SELECT {columns} FROM prices AS p "
        f"WHERE p.symbol = {key} AND p.event_time <= t.event_time "
        f"ORDER BY p.event_time DESC, p.offset DESC LIMIT 1) AS v{on} WHERE t.qty <> 3"
    )


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _plan(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


@pytest.mark.parametrize("join", ["JOIN", "LEFT JOIN"])
def test_rewrite_gives_the_rows_of_the_lateral_subquery(session: SparkSession, join: str) -> None:
    result = session.sql(_query(join))
    rewritten = equi_join_plan(session, result, VIEWS, "prices", DatasetVocabulary())
    assert rewritten is not None
    assert rewritten.schema == result.schema
    expected = _rows(result)
    assert len(expected) > 50
    assert any(r[3] is None for r in expected) == (join == "LEFT JOIN")
    assert _rows(rewritten) == expected
    assert "NestedLoopJoin" in _plan(result)
    assert "NestedLoopJoin" not in _plan(rewritten)


def test_selected_columns_of_the_subquery_are_rewritten(session: SparkSession) -> None:
    result = session.sql(_query("LEFT JOIN", columns="p.price, p.offset, p.event_time"))
    rewritten = equi_join_plan(session, result, VIEWS, "prices", DatasetVocabulary())
    assert rewritten is not None
    assert _rows(rewritten) == _rows(result)


def test_a_key_compared_with_an_expression_keeps_sparks_plan(session: SparkSession) -> None:
    result = session.sql(_query("JOIN", key="upper(t.symbol)"))
    assert equi_join_plan(session, result, VIEWS, "prices", DatasetVocabulary()) is None
