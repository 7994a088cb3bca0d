"""What a recomputing runner keeps between transactions, and the views it reads it through.

The window, interval-join and top-N runners keep records of their inputs in the checkpoint
(one Parquet file per input, ``<input directory>.parquet``) instead of Spark's state store.
Each transaction registers an input's view as its new records that are not late
(``new_view``) plus its kept records (``kept_view``), runs the query as a batch query, and
keeps the records a later transaction may still need (``retained_records``: those at most a
reach behind the watermark). ``new_range`` and ``kept_range`` give the event-time range of
new and kept records, read without a Spark job.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine_spark import checkpoint as cp
from engine_spark.errors import InputDataError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import quote_identifier, register_view, stable_literal
from engine_spark.retractions import in_interval, read_columns
from engine_spark.stateful.plan import WATERMARK_METADATA_KEY
from engine_spark.stateful.stream_inputs import StreamInput, WorkArea, new_records, on_time
from engine_spark.watermark import is_late

EventTimeRange = tuple[datetime, datetime]
"""The oldest and the newest event time of some records."""


@dataclass(frozen=True, slots=True)
class PreparedViews:
    """A recomputation's views of its inputs by query alias: each streamed input's new records
    (not late) and kept records (registered before the query ran: ``prepare_views``)."""

    new: dict[str, DataFrame]
    kept: dict[str, DataFrame | None]


def views(
    session: SparkSession,
    area: WorkArea,
    inputs: Sequence[StreamInput],
    carried: cp.StreamState | None,
) -> PreparedViews:
    """Each input's new records and kept records, by query alias."""
    new: dict[str, DataFrame] = {}
    kept: dict[str, DataFrame | None] = {}
    for inp in inputs:
        alias = inp.request.query_alias
        new[alias] = new_view(session, inp)
        kept[alias] = kept_view(session, area, inp, carried, new[alias])
    return PreparedViews(new, kept)


def new_view(session: SparkSession, inp: StreamInput) -> DataFrame:
    """The input's new records as the batch query read them (``engine.py``), late ones
    dropped."""
    view = session.table(quote_identifier(inp.request.query_alias))
    if inp.previous_watermark is not None:
        column = F.col(quote_identifier(inp.request.vocab.event_time_column))
        view = view.where(~is_late(column, stable_literal(inp.previous_watermark, column)))
    return view


def kept_view(
    session: SparkSession,
    area: WorkArea,
    inp: StreamInput,
    carried: cp.StreamState | None,
    new: DataFrame,
) -> DataFrame | None:
    """The input's kept records (a file of the state) with the schema of ``new``; None when
    there are none."""
    name = f"{inp.directory}.parquet"
    if carried is None or name not in carried.files or no_rows(carried.files[name]):
        return None
    path = area.inputs / name
    path.write_bytes(carried.files[name])
    return session.read.schema(new.schema).parquet(str(path))


def no_rows(parquet: bytes) -> bool:
    try:
        rows: int = pq.ParquetFile(io.BytesIO(parquet)).metadata.num_rows
        return rows == 0
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(f"the checkpoint's kept records are unreadable: {e}") from e


def register_union(
    parts: list[DataFrame | None], alias: str, event_time: str, *, marked: bool
) -> None:
    """Register the union of ``parts`` as ``alias``; ``marked``: its event time marked as
    bounded by a watermark (so Spark's analysis of join bounds sees it)."""
    frames = [p for p in parts if p is not None]
    df = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    register_view(_with_watermark_metadata(df, event_time) if marked else df, alias)


def new_range(inp: StreamInput) -> EventTimeRange | None:
    """The oldest and newest event time of the input's new records that are not late, read
    from the input files' ``offset`` and ``event_time`` columns (no Spark job)."""
    request = inp.request
    offset, event_time = request.vocab.offset_column, request.vocab.event_time_column
    if request.offset_interval is None:
        return None
    times = []
    for path in request.data_paths:
        table = read_columns(path, [offset, event_time])
        if table is None:  # not readable so: assume the records may match
            return _ALL_TIME
        table = table.filter(in_interval(table.column(offset), request.offset_interval))
        if inp.previous_watermark is not None:
            table = table.filter(on_time(table, event_time, inp.previous_watermark))
        times.append(table.column(event_time))
    return _range(times)


def kept_range(carried: cp.StreamState | None, inp: StreamInput) -> EventTimeRange | None:
    """The oldest and newest event time of the input's kept records."""
    name = f"{inp.directory}.parquet"
    if carried is None or name not in carried.files:
        return None
    column = inp.request.vocab.event_time_column
    try:
        kept = pq.read_table(io.BytesIO(carried.files[name]), columns=[column])
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(f"the checkpoint's kept records are unreadable: {e}") from e
    return _range([kept.column(column)])


_ALL_TIME = (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))


def _range(parts: Sequence[pa.ChunkedArray]) -> EventTimeRange | None:
    chunks = [c.cast(_MICROS, safe=False) for part in parts for c in part.chunks]
    if not chunks:
        return None
    bounds = pc.min_max(pa.chunked_array(chunks, _MICROS))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return None if low is None or high is None else (low, high)


_MICROS = pa.timestamp("us", tz="UTC")


def _with_watermark_metadata(df: DataFrame, event_time: str) -> DataFrame:
    return df.select(
        *[
            F.col(quote_identifier(c)).alias(c, metadata={WATERMARK_METADATA_KEY: 0})
            if c == event_time
            else F.col(quote_identifier(c))
            for c in df.columns
        ]
    )


def retained_records(
    carried: cp.StreamState | None, inp: StreamInput, upto: datetime, bound: timedelta
) -> bytes:
    """The input's records a later transaction may still need: kept ones and new ones (read
    here, with the retraction check) that are not late, whose event time is not before
    ``upto`` minus ``bound``."""
    horizon = upto - bound
    if inp.previous_watermark is not None:
        horizon = max(horizon, inp.previous_watermark)
    rows, _ = new_records(inp.request, since=horizon)
    kept = kept_records(carried, f"{inp.directory}.parquet", rows.schema)
    records = pa.concat_tables([kept, rows])
    event_time = inp.request.vocab.event_time_column
    return parquet_bytes(retained(records, event_time, upto, bound))


def kept_records(carried: cp.StreamState | None, name: str, schema: pa.Schema) -> pa.Table:
    """The records retained for an input (file ``name`` of the state) in ``schema`` (columns
    the input gained since read as null)."""
    if carried is None or name not in carried.files:
        return schema.empty_table()
    try:
        kept = pq.read_table(io.BytesIO(carried.files[name]))
        columns = [
            kept.column(f.name).cast(f.type)
            if f.name in kept.column_names
            else pa.nulls(kept.num_rows, f.type)
            for f in schema
        ]
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(
            f"the checkpoint's retained records {name!r} are unreadable: {e}"
        ) from e
    return pa.Table.from_arrays(columns, schema=schema)


def retained(records: pa.Table, event_time: str, watermark: datetime, reach: timedelta) -> pa.Table:
    """The records that may still be needed after ``watermark``: those at most ``reach``
    behind it. A later record is not late (at or after ``watermark``), so a join's bound
    is its reach; a window of width w holds records less than w behind the end of a window
    still open (which is after ``watermark``): its reach is w less a microsecond."""
    return records.filter(on_time(records, event_time, watermark - reach))
