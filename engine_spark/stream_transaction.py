"""A stateful transaction end to end: stream the inputs, run the query, build the output.

``engine.py`` sends every query that is not row-wise here (``is_row_wise_query``). The
inputs are staged and streamed (``streaming.py``), Spark's checkpoint is restored and packed
(``stream_state.py``), the plan decides append or changelog mode (``stateful.py``), and the
collected micro-batches become the output rows: sorted by value in append mode, a changelog
against the last emitted rows per key otherwise (``changelog.py``).
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame, SparkSession

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TransformSql
from engine_spark import checkpoint as cp
from engine_spark import stream_state, streaming
from engine_spark.changelog import changelog
from engine_spark.errors import InvalidQueryError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import register_view
from engine_spark.ordering import is_row_wise, sort_by_values
from engine_spark.outputs import OutputColumns, plan_output_columns
from engine_spark.queries import run_steps
from engine_spark.schema_mapping import result_arrow_schema
from engine_spark.spark_errors import query_errors
from engine_spark.stateful import Mode, stateful_plan
from engine_spark.watermark import input_watermark

log = structlog.get_logger("engine_spark.stream_transaction")

EVENT_TIME = DatasetVocabulary().event_time_column


@dataclass(frozen=True, slots=True)
class StreamRun:
    """A stateful transaction's output rows (final order), the state, the watermark lag."""

    table: pa.Table
    columns: OutputColumns
    state: cp.StreamState
    lag: timedelta


def is_row_wise_query(result: DataFrame) -> bool:
    """Whether the query gives the same answer slice by slice as over all records at once."""
    with query_errors(None, in_step=False):
        return is_row_wise(result)


def run_stream_transaction(
    session: SparkSession,
    request: ep.TransformRequest,
    previous: cp.EngineCheckpoint,
    temporal: set[str],
    batch_result: DataFrame,
) -> StreamRun:
    """Run a stateful query as a streaming query over the slices (``streaming.py``);
    ``temporal``: the aliases of temporal tables (already registered as static views)."""
    inputs = [
        streaming.StreamInput(
            i,
            previous_watermark=previous.input_watermarks.get(i.dataset_id),
            watermark=input_watermark(
                i.explicit_watermarks, previous.input_watermarks.get(i.dataset_id)
            ),
        )
        for i in request.query_inputs
        if i.query_alias not in temporal
    ]
    fingerprint = streaming.query_fingerprint(request.transform)
    carried = previous.stream if previous.stream and previous.stream.query == fingerprint else None
    columns = plan_output_columns(
        [(f.name, f.dataType.simpleString()) for f in batch_result.schema.fields], request.vocab
    )
    arrow_schema = result_arrow_schema(batch_result)
    clock = streaming.PhaseClock()
    with streaming.work_area() as area:
        transaction = streaming.restore(area, carried, session, streaming.spark_watermark(inputs))
        clock.lap("restore")
        for inp in inputs:
            schema = streaming.stage_input(area, inp, transaction)
            view = streaming.stream_view(
                session,
                area,
                inp.directory,
                schema,
                event_time=inp.request.vocab.event_time_column,
                previous_watermark=inp.previous_watermark,
            )
            register_view(view, inp.request.query_alias)
        clock.lap("stage")
        streaming.configure(session)
        result = run_steps(session, request.transform)
        plan = stateful_plan(result)
        clock.lap("plan")
        batches = [t.cast(arrow_schema) for t in streaming.run_query(result, area, plan.mode)]
        clock.lap("run")
        files = stream_state.pack(area.checkpoint, area.inputs)
        clock.lap("pack")
    emitted: bytes | None = None
    if plan.mode is Mode.APPEND:
        table = pa.concat_tables(batches) if batches else arrow_schema.empty_table()
        trailing = [columns.op] if columns.op else []
        table = sort_by_values(table, [columns.event_time], trailing)
    else:
        if columns.op is not None:
            raise InvalidQueryError(
                f"an aggregation without an event-time window emits its own changelog in "
                f"{columns.op!r}: do not select an {columns.op!r} column"
            )
        op = request.vocab.operation_type_column
        before = carried.emitted if carried is not None else None
        changes = changelog(
            batches or [arrow_schema.empty_table()],
            pq.read_table(io.BytesIO(before)) if before is not None else None,
            plan.keys,
            op,
        )
        table = changes.rows
        columns = dataclasses.replace(columns, op=op)
        emitted = parquet_bytes(changes.emitted)
    state = cp.StreamState(
        query=fingerprint,
        spark_version=streaming.spark_version(session),
        mode=plan.mode.value,
        transactions=transaction + 1,
        files=files,
        keys=plan.keys,
        emitted=emitted,
    )
    log.info(
        "transform.stream",
        mode=plan.mode.value,
        batches=len(batches),
        state_bytes=stream_state.total_size(files),
        **clock.laps,
    )
    return StreamRun(table, columns, state, plan.lag)


def check_incremental(
    session: SparkSession, schemas: dict[str, pa.Schema], transform: TransformSql
) -> None:
    """InvalidQuery unless the query can run incrementally: row-wise, or a streaming query
    that ``stateful_plan`` and Spark's own checks for streaming queries accept (the query is
    started over inputs with no files: it runs no batch)."""
    result = run_steps(session, transform)
    if is_row_wise_query(result):
        return
    temporal = {t.name for t in transform.temporal_tables or ()}
    with streaming.work_area() as area:
        stream_state.fresh(area.checkpoint)
        for i, (alias, schema) in enumerate(schemas.items()):
            if alias in temporal:
                continue
            name = f"input-{i}"
            spark_schema = streaming.empty_input(area, name, schema)
            view = streaming.stream_view(
                session, area, name, spark_schema, event_time=EVENT_TIME, previous_watermark=None
            )
            register_view(view, alias)
        streaming.configure(session)
        result = run_steps(session, transform)
        streaming.run_query(result, area, stateful_plan(result).mode)
