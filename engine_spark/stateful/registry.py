"""Which runner runs a stateful query: the ordered registry, and ValidateQuery's check.

``engine.py`` registers the inputs' views (``prepare_views`` first: a recomputation carried
on reads its kept records through them), runs the query once, and hands it to
``run_stateful``. The runners are tried in order (``RUNNERS``), the first whose ``plan`` is
not None runs the transaction:

1. ``as_of_join.runner.AsOfJoinRunner``: a ``JOIN LATERAL`` against a temporal table;
2. a row-wise query needs no state: None, the engine writes it as a batch query;
3. ``window.WindowRunner``: one ``GROUP BY window(...)`` recomputed from open windows;
4. ``interval_join.IntervalJoinRunner``: an inner join bounded in event time both ways;
5. ``top_n.TopNRunner``: ``row_number() ... <= N`` per key;
6. ``shaped.ShapedRunner``: the latest row or a top N per key or overall, running aggregates
   per key, SELECT DISTINCT gated by the watermark (``shapes/``);
7. ``structured_streaming.runner.StructuredStreamingRunner``: anything else.

A carried state names its runner (``checkpoint.Runner``); the other runners step aside, and
the named one refuses (InputDataError) a query it no longer recognises.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TransformSql
from engine_spark import checkpoint as cp
from engine_spark.ordering import is_row_wise
from engine_spark.queries import run_steps
from engine_spark.spark_errors import query_errors
from engine_spark.stateful.as_of_join.join import as_of_join
from engine_spark.stateful.as_of_join.runner import AsOfJoinRunner
from engine_spark.stateful.interval_join import IntervalJoinRunner
from engine_spark.stateful.retention import PreparedViews, views
from engine_spark.stateful.runner import (
    StatefulQuery,
    StatefulRun,
    StatefulRunner,
    carried_stream,
    stream_inputs,
)
from engine_spark.stateful.shaped import ShapedRunner, shaped
from engine_spark.stateful.stream_inputs import WorkArea
from engine_spark.stateful.structured_streaming import runner as structured_streaming
from engine_spark.stateful.structured_streaming.runner import StructuredStreamingRunner
from engine_spark.stateful.top_n import TopNRunner, top_n
from engine_spark.stateful.window import WindowRunner

AS_OF_JOIN = AsOfJoinRunner()
WINDOW = WindowRunner()
INTERVAL_JOIN = IntervalJoinRunner()
TOP_N = TopNRunner()
SHAPED = ShapedRunner()
STRUCTURED_STREAMING = StructuredStreamingRunner()

BEFORE_ROW_WISE: tuple[StatefulRunner[Any], ...] = (AS_OF_JOIN,)
"""Tried before the row-wise check: an as-of join's plan can look row-wise."""
RUNNERS: tuple[StatefulRunner[Any], ...] = (
    WINDOW,
    INTERVAL_JOIN,
    TOP_N,
    SHAPED,
    STRUCTURED_STREAMING,
)
"""Tried in this order once the query is known to need state; the last plans every query."""


def run_stateful(query: StatefulQuery) -> StatefulRun | None:
    """Run the transaction with the first runner that takes it; None for a row-wise query
    (no state: the engine runs it as a batch query over the slices)."""
    run = _first(BEFORE_ROW_WISE, query)
    if run is not None:
        return run
    if query.prepared is None and is_row_wise_query(query.result):
        return None
    query.check_output()
    run = _first(RUNNERS, query)
    assert run is not None, "structured streaming runs every query"
    return run


def _first(runners: tuple[StatefulRunner[Any], ...], query: StatefulQuery) -> StatefulRun | None:
    for runner in runners:
        plan = runner.plan(query)
        if plan is None:
            continue
        run = runner.run(query, plan)
        if run is not None:
            return run
    return None


def is_row_wise_query(result: DataFrame) -> bool:
    """Whether the query gives the same answer slice by slice as over all records at once."""
    with query_errors(None, in_step=False):
        return is_row_wise(result)


def reads_latest_state(request: ep.TransformRequest, previous: cp.EngineCheckpoint) -> bool:
    """Whether the temporal tables' views are their latest state (an as-of join carried on
    reads its versions from its own state instead)."""
    return AS_OF_JOIN.reads_latest_state(request, previous)


def prepare_views(
    session: SparkSession,
    area: WorkArea,
    request: ep.TransformRequest,
    previous: cp.EngineCheckpoint,
    temporal: set[str],
) -> PreparedViews | None:
    """Before the query runs: when the previous state is a recomputation's kept records,
    register the inputs' views as the recomputation's (first) query reads them, so the query
    the engine runs is that query (``WindowRunner.register``, ``IntervalJoinRunner.register``).
    None when there is no such state."""
    carried = carried_stream(request, previous)
    if temporal or carried is None:
        return None
    preparing: dict[cp.Runner, WindowRunner | IntervalJoinRunner] = {
        WINDOW.runner: WINDOW,
        INTERVAL_JOIN.runner: INTERVAL_JOIN,
    }
    runner = preparing.get(carried.runner)
    if runner is None:
        return None
    inputs = stream_inputs(request, previous, temporal)
    prepared = views(session, area, inputs, carried)
    runner.register(prepared, carried, inputs[0].request.vocab.event_time_column)
    return prepared


def check_incremental(
    session: SparkSession,
    schemas: dict[str, pa.Schema],
    transform: TransformSql,
    vocab: DatasetVocabulary,
    event_times: dict[str, str],
) -> None:
    """InvalidQuery unless the query can run incrementally: an as-of join, row-wise, a top-N,
    one of the shapes of ``shaped``, or a streaming query that ``stateful_plan`` and Spark's
    own checks for streaming queries accept (``structured_streaming.runner.accepts``).
    ``event_times``: each input's event-time column (from its own vocabulary), by alias."""
    result = run_steps(session, transform)
    temporal = {t.name for t in transform.temporal_tables or ()}
    streamed = frozenset(schemas) - temporal
    if temporal:
        tables = {t.name: t for t in transform.temporal_tables or ()}
        with query_errors(None, in_step=False):
            if as_of_join(result, streamed, tables, vocab) is not None:
                return
    if is_row_wise_query(result):
        return
    if not temporal:
        with query_errors(None, in_step=False):
            if top_n(result, streamed) is not None:
                return
        if shaped(result, {a: event_times[a] for a in streamed}) is not None:
            return
    structured_streaming.accepts(session, schemas, transform, temporal, event_times)
