"""A stateful transaction as one run of a Spark Structured Streaming query.

Each input that is not a temporal table becomes a file stream over its own directory of the
request's work area. The transaction's new records are written there as one Parquet file
(named by the transaction's number, so the file source, which remembers names, reads it
once), followed by a marker row. Every row carries the input's ODF watermark in an extra
column that drives Spark's watermark:

    scan -> [event_time > previous watermark, markers kept]   (late records are dropped)
         -> withWatermark(extra column, 0 s)                  (Spark's watermark = ODF's)
         -> [markers dropped, behind a nondeterministic condition that stops Spark from
             pushing the user's filters below the watermark operator, where they would drop
             the marker first]
         -> event_time re-aliased with Spark's event-time metadata, extra columns dropped

so the user's ``window(event_time, ...)``, ``session_window`` and event-time join bounds are
bounded by exactly the watermark the coordinator sent (Spark's ``<=`` comparisons in whole
milliseconds made to follow the ODF rules: ``watermark.spark_late_watermark`` and
``spark_eviction_watermark``). The query runs with ``Trigger.AvailableNow`` as one
micro-batch, whose watermarks are preset (``preset_watermarks``): a transaction that
carries only a watermark advance closes windows too. Spark's checkpoint directory is
restored from the ODF checkpoint before the run and packed into it after (``state.py``).
``StructuredStreamingRunner`` is the runner, the registry's last.

The global watermark is the minimum over inputs; an input that has records but no watermark
yet holds stateful operators back at the epoch, and so holds the output watermark back.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType, TimestampType

from common.odf.fragments import TransformSql
from engine_spark import calls
from engine_spark import checkpoint as cp
from engine_spark.changelog import changelog
from engine_spark.checkpoint import Mode, StreamState
from engine_spark.errors import InputDataError, InvalidQueryError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import quote_identifier, register_view
from engine_spark.queries import run_steps
from engine_spark.schema_mapping import spark_input_schema
from engine_spark.spark_errors import query_errors, user_message
from engine_spark.stateful.plan import WATERMARK_METADATA_KEY, StatefulPlan, stateful_plan
from engine_spark.stateful.runner import (
    StatefulQuery,
    StatefulRun,
    in_value_order,
    runner_mismatch,
)
from engine_spark.stateful.stream_inputs import (
    EPOCH,
    PhaseClock,
    StreamInput,
    WorkArea,
    new_records,
    on_time,
    previous_spark_watermark,
    query_fingerprint,
    spark_schema,
    spark_version,
    spark_watermark,
    work_area,
)
from engine_spark.stateful.structured_streaming import state as stream_state
from engine_spark.stateful.window_shape import (
    WindowAggregate,
    labelled_by_window_end,
    window_aggregate,
    windows_anywhere,
)
from engine_spark.watermark import (
    is_late,
    off_millisecond_key,
    spark_eviction_watermark,
    spark_late_watermark,
    spark_output_margin,
)

log = structlog.get_logger("engine_spark.stateful.structured_streaming.runner")

WATERMARK_COLUMN = "__odf_watermark"
MARKER_COLUMN = "__odf_marker"
STREAMING_CONF = {
    # A query's first transaction closes windows in a batch without data; later ones preset
    # the watermark (``restore``) and need none.
    "spark.sql.streaming.noDataMicroBatches.enabled": "true",
    # Keep the logs and state versions the next transaction needs, not the whole history.
    "spark.sql.streaming.minBatchesToRetain": "2",
    # RocksDB checkpoints each state version whole (its SST files shared between versions)
    # and drops old versions as it commits, so the state stays as large as what it holds;
    # the default provider's deltas are only compacted by a background task that a
    # one-second query rarely gives a turn, and grow with every transaction.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
    "spark.sql.streaming.unsupportedOperationCheck": "true",
}


def restore(area: WorkArea, state: StreamState | None, session: SparkSession) -> int:
    """Unpack the previous state (or start afresh); the number of transactions run so far."""
    if state is None:
        stream_state.fresh(area.checkpoint)
        return 0
    if state.spark_version != spark_version(session):
        raise InputDataError(
            f"the checkpoint's streaming state was written by Spark {state.spark_version}, "
            f"this engine runs Spark {spark_version(session)}: state stores are not portable "
            "between Spark versions; replay the dataset with the engine that wrote it"
        )
    stream_state.unpack(state.files, area.checkpoint, area.inputs)
    return state.transactions


def preset_watermarks(area: WorkArea, inputs: Sequence[StreamInput], *, points: bool) -> None:
    """Set the watermarks the transaction's micro-batch runs with in the restored checkpoint.

    Eviction: the one Spark's last commit hands the next micro-batch (what a restarted query
    closes windows and evicts join state with) becomes this transaction's
    (``spark_eviction_watermark`` of ``spark_watermark``), so the batch with the records
    closes what the new watermark closes and no extra batch without data is needed. Late
    records: Spark drops those at or below the last batch's watermark, so that one is lowered
    below the previous watermark (``spark_late_watermark``): a record exactly at it is on
    time (``is_late``). Nothing to do before a query's first batch."""
    upto = spark_watermark(inputs)
    if upto is not None:
        evict = spark_eviction_watermark(upto, points=points)
        stream_state.advance_next_watermark(area.checkpoint, _millis(evict))
    previous = previous_spark_watermark(inputs)
    if previous is not None and previous > EPOCH:
        stream_state.lower_last_watermark(area.checkpoint, _millis(spark_late_watermark(previous)))


def _millis(value: datetime) -> int:
    return (value - EPOCH) // timedelta(milliseconds=1)


def stage_input(
    area: WorkArea, inp: StreamInput, rows: pa.Table, transaction: int, *, points: bool
) -> None:
    """Write the input's new records (``new_records``) and its watermark marker, which moves
    Spark's watermark to the input's eviction watermark (``spark_eviction_watermark``)."""
    directory = area.inputs / inp.directory
    directory.mkdir(exist_ok=True)
    # A marker every transaction, also without records or watermark: Spark forgets on restart
    # which inputs it heard from, and an input it does not hear from does not hold it back.
    marked = _with_marker(rows, spark_eviction_watermark(inp.watermark or EPOCH, points=points))
    pq.write_table(marked, directory / f"tx-{transaction:012d}.parquet", compression="none")


def empty_input(area: WorkArea, name: str, schema: pa.Schema) -> StructType:
    """A streamed input with no files (ValidateQuery): its directory; its Spark schema."""
    (area.inputs / name).mkdir(exist_ok=True)
    return spark_schema(spark_input_schema(schema))


def stream_view(
    session: SparkSession,
    area: WorkArea,
    name: str,
    schema: StructType,
    *,
    event_time: str,
    previous_watermark: datetime | None,
) -> DataFrame:
    """The input streamed from its directory ``name``, ``event_time`` bounded by its
    watermark and records late by ``previous_watermark`` dropped (``is_late``)."""
    extra = StructType(
        [
            *schema.fields,
            StructField(WATERMARK_COLUMN, TimestampType()),
            StructField(MARKER_COLUMN, BooleanType()),
        ]
    )
    marker = F.col(MARKER_COLUMN)
    df = (
        session.readStream.schema(extra)
        .option("maxFileAge", "36500d")
        .parquet(str(area.inputs / name))
    )
    if previous_watermark is not None:
        late = is_late(F.col(quote_identifier(event_time)), previous_watermark)
        df = df.where(marker | ~late)
    df = df.withWatermark(WATERMARK_COLUMN, "0 seconds")
    df = df.where(~marker | (F.spark_partition_id() < 0))
    columns = []
    for f in schema.fields:
        column = F.col(quote_identifier(f.name))
        if f.name == event_time and isinstance(f.dataType, TimestampType):
            column = column.alias(f.name, metadata={WATERMARK_METADATA_KEY: 0})
        columns.append(column)
    return df.select(*columns)


def configure(session: SparkSession) -> None:
    """The request session's settings for streaming queries.

    State partitions: no more than the cores Spark has (``local[2]``: 2). Each partition's
    state store is opened and committed in every micro-batch, a fixed cost per partition
    (measured at 100k records per transaction: ~0.9 s more than the stateless query with 4,
    ~0.5 s with 2). A query's first transaction fixes the number in its checkpoint; the
    output does not depend on it.
    """
    conf = session.conf
    for key, value in STREAMING_CONF.items():
        conf.set(key, value)
    shuffle = int(conf.get("spark.sql.shuffle.partitions") or "4")
    cores = session.sparkContext.defaultParallelism
    conf.set("spark.sql.shuffle.partitions", str(max(1, min(shuffle, cores))))


def run_query(result: DataFrame, area: WorkArea, mode: Mode) -> list[pa.Table]:
    """Run the query over what is staged; each micro-batch's output, in batch order."""
    batches: list[tuple[int, pa.Table]] = []
    failed: list[Exception] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        try:
            batches.append((batch_id, df.toArrow()))
        except Exception as e:  # Spark reports it wrapped twice, its cause out of reach
            failed.append(e)
            raise

    output_mode = "append" if mode is Mode.APPEND else "update"
    try:
        with query_errors(None, in_step=False):
            query = (
                result.writeStream.outputMode(output_mode)
                .foreachBatch(collect)
                .trigger(availableNow=True)
                .option("checkpointLocation", str(area.checkpoint))
                .start()
            )
    except AnalysisException as e:  # Spark's checks of what a streaming query may do
        raise InvalidQueryError(
            f"the query cannot run incrementally over streams ({output_mode} mode): "
            f"{user_message(e)}"
        ) from e
    control = calls.current()
    remove: Callable[[], None] = (
        control.on_cancel(query.stop) if control is not None else (lambda: None)
    )
    try:
        with query_errors(None, in_step=False):
            try:
                query.awaitTermination()
            except Exception as e:
                if failed:  # the batch's own error (the query's fault or the engine's)
                    raise failed[0] from e
                raise
    finally:
        remove()
    if control is not None:
        control.raise_if_cancelled()
    batches.sort(key=lambda b: b[0])
    log.debug("stream.batches", count=len(batches))
    return [t for _, t in batches]


SESSION_OPERATOR = "sessionWindowStateStoreSaveExec"
"""The name Spark's state metadata gives a session window aggregation's state."""


def oldest_open_session(session: SparkSession, area: WorkArea) -> datetime | None:
    """The start of the oldest session still open after the run (in Spark's state, read with
    its state data sources); None without open sessions."""
    checkpoint = str(area.checkpoint)
    operators = session.read.format("state-metadata").load(checkpoint)
    ids = [
        int(r.operatorId)
        for r in operators.where(F.col("operatorName") == SESSION_OPERATOR).collect()
    ]
    starts = []
    for operator in ids:
        state = session.read.format("statestore").option("operatorId", operator).load(checkpoint)
        row = state.agg(F.unix_micros(F.min("key.sessionStartTime")).alias("start")).first()
        if row is not None and row.start is not None:
            starts.append(EPOCH + timedelta(microseconds=int(row.start)))
    return min(starts, default=None)


def latest_off_millisecond(rows: pa.Table, inp: StreamInput) -> datetime | None:
    """The latest event time of the input's new records that is on time and not a whole
    millisecond (Spark's eviction cannot tell it from the millisecond below the watermark);
    None when there is none."""
    column = inp.request.vocab.event_time_column
    if column not in rows.column_names or not pa.types.is_timestamp(rows.schema.field(column).type):
        return None
    if inp.previous_watermark is not None:
        rows = rows.filter(on_time(rows, column, inp.previous_watermark))
    values = rows.column(column).cast(pa.timestamp("us"), safe=False)
    micros = values.cast(pa.int64()).drop_null().to_numpy()
    off = micros[micros % 1000 != 0]
    if not len(off):
        return None
    return EPOCH + timedelta(microseconds=int(off.max()))


def _with_marker(rows: pa.Table, watermark: datetime) -> pa.Table:
    stamp_type = pa.timestamp("us", tz="UTC")
    data = rows.append_column(
        pa.field(WATERMARK_COLUMN, stamp_type),
        pa.repeat(pa.scalar(watermark, stamp_type), rows.num_rows),
    ).append_column(pa.field(MARKER_COLUMN, pa.bool_()), pa.repeat(pa.scalar(False), rows.num_rows))
    marker = pa.Table.from_pylist(
        [{WATERMARK_COLUMN: watermark, MARKER_COLUMN: True}], schema=data.schema
    )
    return pa.concat_tables([data, marker])


@dataclass(frozen=True, slots=True)
class StreamingPlan:
    carried: StreamState | None
    """Spark's checkpoint carried on; None for the query's first transaction."""


class StructuredStreamingRunner:
    """Any other stateful query (session windows, outer joins, aggregates without an
    event-time group, DISTINCT, ...) as one run of a Structured Streaming query per
    transaction. State: Spark's checkpoint directory (``state.py``) and, in changelog mode,
    the last emitted row per key. Tried last: it plans every query."""

    runner = cp.Runner.SPARK_STREAMING

    def plan(self, query: StatefulQuery) -> StreamingPlan:
        """Every query runs; the plan is the state carried on."""
        carried = query.carried
        if carried is not None and carried.runner != self.runner:
            raise runner_mismatch(f"streaming state of the {carried.runner.value!r} runner")
        return StreamingPlan(carried)

    def run(self, query: StatefulQuery, plan: StreamingPlan) -> StatefulRun:
        session, request, area, inputs = query.session, query.request, query.area, query.inputs
        columns, arrow_schema = query.columns, query.arrow_schema
        carried = plan.carried
        clock = PhaseClock()
        transaction = restore(area, carried, session)
        clock.lap("restore")
        staged = []
        off_ms = []
        for inp in inputs:
            rows, schema = new_records(inp.request)
            staged.append((inp, rows))
            off_ms.append(latest_off_millisecond(rows, inp))
            (area.inputs / inp.directory).mkdir(exist_ok=True)  # its files once planned
            view = stream_view(
                session,
                area,
                inp.directory,
                schema,
                event_time=inp.request.vocab.event_time_column,
                previous_watermark=inp.previous_watermark,
            )
            register_view(view, inp.request.query_alias)
        configure(session)
        result = run_steps(session, request.transform)
        plan_ = stateful_plan(result)
        clock.lap("plan")
        preset_watermarks(area, inputs, points=plan_.points)
        for inp, rows in staged:
            stage_input(area, inp, rows, transaction, points=plan_.points)
        clock.lap("stage")
        batches = [t.cast(arrow_schema) for t in run_query(result, area, plan_.mode)]
        clock.lap("run")
        files = stream_state.pack(area.checkpoint, area.inputs)
        clock.lap("pack")
        emitted: bytes | None = None
        if plan_.mode is Mode.APPEND:
            table = pa.concat_tables(batches) if batches else arrow_schema.empty_table()
            table = in_value_order(table, columns)
        else:
            if columns.op is not None:
                raise InvalidQueryError(
                    f"an aggregation not grouped by event time emits its own changelog in "
                    f"{columns.op!r}: do not select an {columns.op!r} column"
                )
            op = request.vocab.operation_type_column
            before = carried.emitted if carried is not None else None
            changes = changelog(
                batches or [arrow_schema.empty_table()],
                pq.read_table(io.BytesIO(before)) if before is not None else None,
                plan_.keys,
                op,
            )
            table = changes.rows
            columns = dataclasses.replace(columns, op=op)
            emitted = parquet_bytes(changes.emitted)
        upto = spark_watermark(inputs)
        evicted = _evicted(plan_, upto)
        if plan_.reach is None:  # keys off a whole millisecond whatever the event times
            off_key = upto
        else:
            latest = max((t for t in off_ms if t is not None), default=None)
            off_key = off_millisecond_key(
                latest + plan_.reach if latest is not None else None,
                carried.off_millisecond if carried is not None else None,
                evicted,
            )
        state = StreamState(
            query=query_fingerprint(request.transform),
            spark_version=spark_version(session),
            mode=plan_.mode,
            transactions=transaction + 1,
            files=files,
            keys=plan_.keys,
            emitted=emitted,
            off_millisecond=off_key if plan_.points or plan_.outer else None,
        )
        log.info(
            "transform.stream",
            mode=plan_.mode.value,
            batches=len(batches),
            state_bytes=state.files_size,
            **clock.laps,
        )
        known = [i.watermark for i in inputs if i.watermark is not None]
        lag = plan_.lag
        if known:
            lag = _output_lag(
                plan_, result, inputs, request.vocab.event_time_column, min(known), off_key
            )
        if known and not labelled_by_window_end(result, request.vocab.event_time_column):
            # a session labelled by its start: no later output before the oldest open session
            with query_errors(None, in_step=False):
                oldest = oldest_open_session(session, area)
            if oldest is not None:
                lag = max(lag, min(known) - oldest)
        return StatefulRun(table, columns, state, lag)


def _evicted(plan_: StatefulPlan, upto: datetime | None) -> datetime | None:
    """Spark's eviction watermark for the keys the output may still hold (None without a
    watermark): a join's state watermark (its rows at or below it are evicted, and it is
    the watermark of the operators above), else the watermark closing point keys."""
    if upto is None:
        return None
    if plan_.outer or plan_.spark_lag:
        return spark_eviction_watermark(upto, points=plan_.points) - plan_.spark_lag
    return spark_eviction_watermark(upto, points=True)


def _output_lag(
    plan_: StatefulPlan,
    result: DataFrame,
    inputs: Sequence[StreamInput],
    output_event_time: str,
    watermark: datetime,
    off_key: datetime | None,
) -> timedelta:
    """How far the output watermark lags ``watermark`` (the inputs' minimum) after a run
    under Structured Streaming, from what Spark may still emit (see ``watermark.py``):

    * a window aggregation over the inputs: ``window_bound``, less Spark's margin for point
      keys off a whole millisecond (``spark_output_margin``);
    * a window aggregation above a join: Spark closes its windows by the join's state
      watermark (``_evicted``), so its output watermark is ``window_bound`` of that;
    * an outer join: the exact bound (``lag``), or the first microsecond after Spark's
      state watermark while a row off a whole millisecond may be held above it (evicted,
      and emitted unmatched, a transaction late); point keys or sessions above a join: that
      microsecond (they close by the join's state watermark);
    * otherwise the exact lag (an inner join's bound), with the point keys' margin."""
    margin = spark_output_margin(watermark, points=plan_.points, off_millisecond=off_key)
    window = _window(result, inputs, output_event_time)
    if window is not None:
        return window.lag_at(watermark) + margin
    joined = plan_.outer or plan_.spark_lag
    evicted = _evicted(plan_, watermark)
    if not joined or evicted is None:
        return plan_.lag + margin
    with query_errors(None, in_step=False):
        above = windows_anywhere(result, output_event_time)
    if above:
        return watermark - min(w.bound_after(evicted) for w in above)
    bound = watermark - plan_.lag
    if plan_.points or (plan_.outer and off_key is not None and off_key > evicted):
        # point keys or sessions above a join close by its state watermark too
        bound = min(bound, evicted + timedelta(microseconds=1))
    return watermark - bound


def _window(
    result: DataFrame, inputs: Sequence[StreamInput], output_event_time: str
) -> WindowAggregate | None:
    """The query's window aggregation, as the window runner reads it (its output watermark
    is ``WindowAggregate.lag_at`` behind the input watermark); None when it reads none."""
    names = {i.request.vocab.event_time_column for i in inputs}
    if len(names) != 1:
        return None
    aliases = frozenset(i.request.query_alias for i in inputs)
    with query_errors(None, in_step=False):
        return window_aggregate(result, names.pop(), aliases, output_event_time)


def accepts(
    session: SparkSession,
    schemas: dict[str, pa.Schema],
    transform: TransformSql,
    temporal: set[str],
    event_times: dict[str, str],
) -> None:
    """InvalidQuery unless ``stateful_plan`` and Spark's own checks for streaming queries
    accept the query (ValidateQuery): it is started over inputs with no files, so it runs no
    batch. ``event_times``: each input's event-time column (from its own vocabulary)."""
    with work_area() as area:
        stream_state.fresh(area.checkpoint)
        for i, (alias, schema) in enumerate(schemas.items()):
            if alias in temporal:
                continue
            name = f"input-{i}"
            spark_schema = empty_input(area, name, schema)
            view = stream_view(
                session,
                area,
                name,
                spark_schema,
                event_time=event_times[alias],
                previous_watermark=None,
            )
            register_view(view, alias)
        configure(session)
        result = run_steps(session, transform)
        run_query(result, area, stateful_plan(result).mode)
