"""An event-time as-of join's transaction: release waiting stream rows, run the query, keep
the state (``join.py`` the query form, ``state.py`` what is kept, ``plan.py`` the equi-join
plan it runs as). ``AsOfJoinRunner`` is the runner, the registry's first.

The stream's new records that are not late join the rows still waiting; those at or before
the versioned input's (new) watermark are released. The versioned input's new records that
are not late join the kept versions. The query then runs as a plain batch query with the
released rows as the stream's view and the versions as the temporal table's view: the
lateral subquery finds each row's newest version at or before its event time, exactly as
over all records. Retractions or corrections in either input are refused (InvalidQuery).
"""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from common.odf import engine_protocol as ep
from engine_spark import checkpoint as cp
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import register_view
from engine_spark.outputs import OutputColumns, plan_output_columns
from engine_spark.queries import run_steps
from engine_spark.schema_mapping import result_arrow_schema
from engine_spark.spark_errors import query_errors
from engine_spark.stateful.as_of_join.join import AsOfJoin, as_of_join
from engine_spark.stateful.as_of_join.plan import equi_join_plan
from engine_spark.stateful.as_of_join.state import horizon, retained_versions, split_released
from engine_spark.stateful.retention import kept_records
from engine_spark.stateful.runner import (
    StatefulQuery,
    StatefulRun,
    carried_stream,
    in_value_order,
    runner_mismatch,
    stream_input,
)
from engine_spark.stateful.stream_inputs import PhaseClock, StreamInput, WorkArea, new_records

log = structlog.get_logger("engine_spark.stateful.as_of_join.runner")

# Run the recognized join as an equi-join plus a ranking (``plan.py``); False keeps
# Spark's decorrelation of the lateral subquery (the baseline of bench/bench_asof.py).
EQUI_JOIN = True


class AsOfJoinRunner:
    """An event-time as-of join of a stream with a temporal table. State: the stream rows
    waiting for the versioned input's watermark and the versions they can still need
    (``state.py``); the temporal table's own state is then not kept (``absorbed``)."""

    runner = cp.Runner.ASOF_JOIN

    def plan(self, query: StatefulQuery) -> AsOfJoin | None:
        """The query's event-time as-of join against a temporal table (``join.py``)."""
        if not query.tables:
            return None
        aliases = frozenset(i.query_alias for i in query.request.query_inputs)
        streams = aliases - frozenset(query.tables)
        with query_errors(None, in_step=False):
            return as_of_join(query.result, streams, query.tables, query.request.vocab)

    def run(self, query: StatefulQuery, plan: AsOfJoin) -> StatefulRun:
        """The transaction's output (rows released now, in value order) and the next state."""
        session, area, request, previous = query.session, query.area, query.request, query.previous
        join = plan
        carried = query.carried
        if carried is not None and carried.runner != self.runner:
            raise runner_mismatch(f"streaming state of the {carried.runner.value!r} runner")
        clock = PhaseClock()
        by_alias = {i.query_alias: i for i in request.query_inputs}
        stream = stream_input(by_alias[join.stream], previous)
        versioned = stream_input(by_alias[join.versioned], previous)
        rows, rows_schema = _with_kept(carried, stream)
        versions, versions_schema = _with_kept(carried, versioned)
        event_time = request.vocab.event_time_column
        released, waiting = split_released(rows, event_time, versioned.watermark)
        clock.lap("read")
        _register(session, area, stream, released, rows_schema)
        _register(session, area, versioned, versions, versions_schema)
        result = run_steps(session, request.transform)
        rewritten = (
            equi_join_plan(session, result, frozenset(by_alias), join.versioned, request.vocab)
            if EQUI_JOIN
            else None
        )
        result = result if rewritten is None else rewritten
        columns, arrow_schema = _columns(result, request)
        with query_errors(None, in_step=False):
            table = result.toArrow().cast(arrow_schema)
        clock.lap("run")
        kept = retained_versions(
            versions,
            join.primary_key,
            event_time,
            request.vocab.offset_column,
            horizon(stream.watermark, versioned.watermark),
        )
        files = {
            f"{stream.directory}.parquet": parquet_bytes(waiting),
            f"{versioned.directory}.parquet": parquet_bytes(kept),
        }
        state = query.next_state(files, runner=self.runner)
        log.info(
            "transform.as_of_join",
            released=released.num_rows,
            waiting=waiting.num_rows,
            versions=kept.num_rows,
            plan="lateral" if rewritten is None else "equi-join",
            **clock.laps,
        )
        return StatefulRun(
            in_value_order(table, columns),
            columns,
            state,
            timedelta(0),
            absorbed=frozenset({join.versioned}),
        )

    def reads_latest_state(
        self, request: ep.TransformRequest, previous: cp.EngineCheckpoint
    ) -> bool:
        """Whether the temporal tables' views are their latest state (registered before the
        query runs): not when an as-of join carries on, it reads its versions from its own
        state."""
        carried = carried_stream(request, previous)
        return carried is None or carried.runner != self.runner


def _with_kept(carried: cp.StreamState | None, inp: StreamInput) -> tuple[pa.Table, StructType]:
    """The input's kept rows and its new ones that are not late (refusing retractions)."""
    new, schema = new_records(inp.request, since=inp.previous_watermark)
    kept = kept_records(carried, f"{inp.directory}.parquet", new.schema)
    return pa.concat_tables([kept, new]), schema


def _register(
    session: SparkSession,
    area: WorkArea,
    inp: StreamInput,
    rows: pa.Table,
    schema: StructType,
) -> None:
    path = area.inputs / f"as-of-{inp.directory}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, path)
    register_view(session.read.schema(schema).parquet(str(path)), inp.request.query_alias)


def _columns(result: DataFrame, request: ep.TransformRequest) -> tuple[OutputColumns, pa.Schema]:
    fields = [(f.name, f.dataType.simpleString()) for f in result.schema.fields]
    return plan_output_columns(fields, request.vocab), result_arrow_schema(result)
