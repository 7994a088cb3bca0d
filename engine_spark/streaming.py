"""A stateful transaction as one run of a Spark Structured Streaming query.

Each input that is not a temporal table becomes a file stream over its own directory of the
request's work area. The transaction's new records are written there as one Parquet file
(named by the transaction's number, so the file source, which remembers names, reads it
once), followed by a marker row. Every row carries the input's ODF watermark in an extra
column that drives Spark's watermark:

    scan -> [not is_late(event_time, previous watermark), markers kept]
         -> withWatermark(extra column, 0 s)    (Spark's watermark from ODF's: watermark.py)
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
restored from the ODF checkpoint before the run and packed into it after
(``stream_state.py``).

The global watermark is the minimum over inputs; an input that has records but no watermark
yet holds stateful operators back at the epoch, and so holds the output watermark back.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import BooleanType, StructField, StructType, TimestampType

from common.odf.engine_protocol import TransformRequestInput
from common.odf.fragments import TransformSql
from engine_spark import calls, stream_state
from engine_spark.checkpoint import StreamState
from engine_spark.errors import InputDataError, InvalidQueryError
from engine_spark.exchange import read_schema, read_table
from engine_spark.inputs import quote_identifier
from engine_spark.retractions import check_slice, in_interval
from engine_spark.schema_mapping import spark_input_schema, spark_input_table
from engine_spark.spark_errors import query_errors, user_message
from engine_spark.staging import spark_values
from engine_spark.stateful import WATERMARK_METADATA_KEY, Mode
from engine_spark.watermark import is_late, spark_eviction_watermark, spark_late_watermark

log = structlog.get_logger("engine_spark.streaming")

WATERMARK_COLUMN = "__odf_watermark"
MARKER_COLUMN = "__odf_marker"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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


class PhaseClock:
    """Seconds spent in each phase of a streaming transaction (for the logs)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.laps[phase] = round(now - self._last, 3)
        self._last = now


@dataclass(frozen=True, slots=True)
class StreamInput:
    """One streamed input of the transaction."""

    request: TransformRequestInput
    previous_watermark: datetime | None
    """The input's watermark before this transaction: records before it are late."""
    watermark: datetime | None
    """The input's watermark after this transaction."""

    @property
    def directory(self) -> str:
        return str(self.request.dataset_id.to_multibase())


def query_fingerprint(transform: TransformSql) -> str:
    """Identifies the query a streaming state belongs to (steps and temporal tables)."""
    doc = {
        "steps": [[s.alias, s.query] for s in transform.steps()],
        "temporal": [[t.name, list(t.primary_key)] for t in transform.temporal_tables or ()],
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def spark_version(session: SparkSession) -> str:
    return ".".join(session.version.split(".")[:2])


@dataclass(slots=True)
class WorkArea:
    """The request's directories: Spark's checkpoint and one directory per streamed input."""

    root: Path

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def inputs(self) -> Path:
        return self.root / "in"


@contextmanager
def work_area() -> Iterator[WorkArea]:
    root = Path(tempfile.mkdtemp(prefix="odf-engine-stream-"))
    try:
        area = WorkArea(root)
        area.inputs.mkdir()
        yield area
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
    if previous is not None and previous > _EPOCH:
        stream_state.lower_last_watermark(area.checkpoint, _millis(spark_late_watermark(previous)))


def spark_watermark(inputs: Sequence[StreamInput]) -> datetime | None:
    """Spark's global watermark once every input's marker is read: the minimum over inputs,
    an input without a watermark counting as the epoch."""
    return min((i.watermark or _EPOCH for i in inputs), default=None)


def previous_spark_watermark(inputs: Sequence[StreamInput]) -> datetime | None:
    """The global watermark before this transaction (the same minimum)."""
    return min((i.previous_watermark or _EPOCH for i in inputs), default=None)


def _millis(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(milliseconds=1)


def stage_input(
    area: WorkArea, inp: StreamInput, rows: pa.Table, transaction: int, *, points: bool
) -> None:
    """Write the input's new records (``new_records``) and its watermark marker, which moves
    Spark's watermark to the input's eviction watermark (``spark_eviction_watermark``)."""
    directory = area.inputs / inp.directory
    directory.mkdir(exist_ok=True)
    # A marker every transaction, also without records or watermark: Spark forgets on restart
    # which inputs it heard from, and an input it does not hear from does not hold it back.
    marked = _with_marker(rows, spark_eviction_watermark(inp.watermark or _EPOCH, points=points))
    pq.write_table(marked, directory / f"tx-{transaction:012d}.parquet", compression="none")


def empty_input(area: WorkArea, name: str, schema: pa.Schema) -> StructType:
    """A streamed input with no files (ValidateQuery): its directory; its Spark schema."""
    (area.inputs / name).mkdir(exist_ok=True)
    return _spark_schema(spark_input_schema(schema))


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
            starts.append(_EPOCH + timedelta(microseconds=int(row.start)))
    return min(starts, default=None)


def _spark_schema(schema: pa.Schema) -> StructType:
    return from_arrow_schema(schema, prefer_timestamp_ntz=False)


def new_records(
    inp: TransformRequestInput, *, since: datetime | None = None
) -> tuple[pa.Table, StructType]:
    """The input's records in its offset interval, as Spark values, in offset order, and their
    Spark schema; InvalidQuery when they hold a retraction or correction
    (``retractions.py``). ``since``: only the records not late by it (``on_time``)."""
    schema = spark_input_schema(read_schema(inp.schema_file))
    spark = _spark_schema(schema)
    rows = _records_in_interval(inp, schema)
    check_slice(inp, rows, stateful=True)
    if since is not None:
        rows = rows.filter(on_time(rows, inp.vocab.event_time_column, since))
    offset = inp.vocab.offset_column
    return spark_values(rows.sort_by([(offset, "ascending")]), spark), spark


def on_time(rows: pa.Table, column: str, watermark: datetime) -> pc.Expression:
    """A filter of ``rows``: event time ``column`` not late by ``watermark``
    (``watermark.is_late``; a filter drops a null event time)."""
    value = pa.scalar(watermark, rows.schema.field(column).type)
    return ~is_late(pc.field(column), value)


def _records_in_interval(inp: TransformRequestInput, schema: pa.Schema) -> pa.Table:
    """The records in the input's offset interval, in ``schema``, in no particular order."""
    if inp.offset_interval is None or not inp.data_paths:
        return schema.empty_table()
    parts = []
    offset = inp.vocab.offset_column
    for path in inp.data_paths:
        table = spark_input_table(read_table(path))
        table = table.filter(in_interval(table.column(offset), inp.offset_interval))
        columns = [
            table.column(f.name).cast(f.type)
            if f.name in table.column_names
            else pa.nulls(table.num_rows, f.type)
            for f in schema
        ]
        parts.append(pa.Table.from_arrays(columns, schema=schema))
    return pa.concat_tables(parts)


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
