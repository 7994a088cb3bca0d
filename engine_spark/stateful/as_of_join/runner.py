"""An event-time as-of join's transaction: release waiting stream rows, run the query, keep
the state (``asof_join.py`` the query form, ``asof_state.py`` what is kept).

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
from engine_spark.stateful.as_of_join.join import AsOfJoin
from engine_spark.stateful.as_of_join.plan import equi_join_plan
from engine_spark.stateful.as_of_join.state import horizon, retained_versions, split_released
from engine_spark.stateful.structured_streaming import runner as streaming
from engine_spark.stateful.transaction import (
    StreamRun,
    carried_stream,
    in_value_order,
    kept_records,
    recomputed_state,
    runner_mismatch,
)
from engine_spark.watermark import input_watermark

log = structlog.get_logger("engine_spark.stateful.as_of_join.runner")

# Run the recognized join as an equi-join plus a ranking (``asof_plan.py``); False keeps
# Spark's decorrelation of the lateral subquery (the baseline of bench/bench_asof.py).
EQUI_JOIN = True


def run_asof_transaction(
    session: SparkSession,
    area: streaming.WorkArea,
    request: ep.TransformRequest,
    previous: cp.EngineCheckpoint,
    join: AsOfJoin,
) -> StreamRun:
    """The transaction's output (rows released now, in value order) and the next state."""
    carried = carried_stream(request, previous)
    if carried is not None and carried.runner != cp.ASOF_JOIN:
        raise runner_mismatch(f"streaming state of the {carried.runner!r} runner")
    clock = streaming.PhaseClock()
    by_alias = {i.query_alias: i for i in request.query_inputs}
    stream = _stream_input(by_alias[join.stream], previous)
    versioned = _stream_input(by_alias[join.versioned], previous)
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
    state = recomputed_state(session, request, carried, files, runner=cp.ASOF_JOIN)
    log.info(
        "transform.as_of_join",
        released=released.num_rows,
        waiting=waiting.num_rows,
        versions=kept.num_rows,
        plan="lateral" if rewritten is None else "equi-join",
        **clock.laps,
    )
    return StreamRun(in_value_order(table, columns), columns, state, timedelta(0))


def _stream_input(
    inp: ep.TransformRequestInput, previous: cp.EngineCheckpoint
) -> streaming.StreamInput:
    before = previous.input_watermarks.get(inp.dataset_id)
    return streaming.StreamInput(
        inp,
        previous_watermark=before,
        watermark=input_watermark(inp.explicit_watermarks, before),
    )


def _with_kept(
    carried: cp.StreamState | None, inp: streaming.StreamInput
) -> tuple[pa.Table, StructType]:
    """The input's kept rows and its new ones that are not late (refusing retractions)."""
    new, schema = streaming.new_records(inp.request, since=inp.previous_watermark)
    kept = kept_records(carried, f"{inp.directory}.parquet", new.schema)
    return pa.concat_tables([kept, new]), schema


def _register(
    session: SparkSession,
    area: streaming.WorkArea,
    inp: streaming.StreamInput,
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
