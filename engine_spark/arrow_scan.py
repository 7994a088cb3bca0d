"""Arrow IPC inputs read where they lie: no restaging, no record through the driver.

An Arrow IPC input (the coordinator's Arrow exchange: one uncompressed Arrow IPC file per
input slice) becomes a DataFrame whose partitions read the file themselves:
``range(k, numPartitions=k).mapInArrow(read)``, where task ``i`` memory-maps the file in its
Python worker and yields its share of the records, a consecutive row range (so partition
order is file order, and a query sees the rows in offset order). Each batch is converted to
exactly what ``createDataFrame`` would have sent the JVM (``staging.spark_values``, PySpark's
own conversion), so the types and values are those of the staged Parquet file this replaces;
the DataFrame's schema is nullable all the way down, as Spark reads every Parquet input, so
the Arrow and Parquet exchanges of the same records give a query identical inputs. Only the
path, the row ranges and the schema cross into the workers.

The driver reads the file's schema and its batches' headers (memory-mapped, zero copy): a
truncated or malformed file is refused there, in one line naming it, before any job runs.

Workers must be able to map the file: always with a local master; on a cluster only when the
file lies under the shared staging directory every node mounts (``Staging.maps``). Otherwise,
and for types the staged Parquet file could not keep either (``staging.stageable``), the
input goes the former way (``staging.arrow_frame``: staged as Parquet, or
``createDataFrame``). The workers run the engine's interpreter (``PYSPARK_PYTHON``): they
import ``pyarrow``, ``pyspark`` and this package.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import overload

import pyarrow as pa
import pyarrow.ipc as ipc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from engine_spark.errors import InputDataError
from engine_spark.exchange import DataFormat, detect_format, read_arrow, read_schema
from engine_spark.schema_mapping import spark_input_schema, spark_input_table
from engine_spark.session import quiet_pandas_warning
from engine_spark.staging import Staging, arrow_frame, spark_values, stageable

MIN_SPLIT_ROWS = 128 * 1024
"""Rows below which an input is not split between tasks (as a staged file's row group)."""
MAX_BATCH_ROWS = 64 * 1024
"""Rows per batch a worker sends the JVM at most (the coordinator writes batches this size)."""


@dataclass(frozen=True, slots=True)
class Piece:
    """Rows ``offset .. offset + length - 1`` of the file's batch number ``batch``."""

    batch: int
    offset: int
    length: int


def split_rows(total: int, parallelism: int, min_rows: int = MIN_SPLIT_ROWS) -> list[range]:
    """``total`` rows as consecutive, balanced row ranges, one per task: at most
    ``parallelism`` of them and none under ``min_rows`` rows (always at least one)."""
    k = max(1, min(parallelism, -(-total // min_rows)))
    return [range(total * i // k, total * (i + 1) // k) for i in range(k)]


def pieces(batch_rows: Sequence[int], rows: range, max_rows: int = MAX_BATCH_ROWS) -> list[Piece]:
    """The pieces of the file's batches (their row counts, in order) that hold ``rows``, in
    order, each at most ``max_rows`` long."""
    out: list[Piece] = []
    first = 0
    for index, count in enumerate(batch_rows):
        lo, hi = max(rows.start, first), min(rows.stop, first + count)
        for start in range(lo, hi, max_rows):
            out.append(Piece(index, start - first, min(max_rows, hi - start)))
        first += count
        if first >= rows.stop:
            break
    return out


@overload
def nullable(t: StructType) -> StructType: ...
@overload
def nullable(t: DataType) -> DataType: ...
def nullable(t: DataType) -> DataType:
    """``t`` with every field, element and value nullable (Spark's ``asNullable``)."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, nullable(f.dataType), True) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(nullable(t.keyType), nullable(t.valueType), True)
    return t


def open_batches(path: str) -> list[pa.RecordBatch]:
    """The record batches of an Arrow IPC file or stream, memory-mapped (no data copied;
    the headers are read and checked against the file's size)."""
    fmt = detect_format(path)
    try:
        source = pa.memory_map(path, "r")
        if fmt is DataFormat.ARROW_FILE:
            reader = ipc.open_file(source)
            return [reader.get_batch(i) for i in range(reader.num_record_batches)]
        if fmt is DataFormat.ARROW_STREAM:
            return list(ipc.open_stream(source))
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(f"cannot read Arrow IPC data: {_first_line(e)}", path=path) from e
    raise InputDataError("expected an Arrow IPC file, found Parquet", path=path)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def scan_arrow_file(session: SparkSession, path: str, schema: StructType) -> DataFrame:
    """The Arrow IPC file at ``path`` as a DataFrame of ``schema`` (the Spark form of its
    schema), its partitions reading the file where it lies."""
    batch_rows = [b.num_rows for b in open_batches(path)]
    parallelism = session.sparkContext.defaultParallelism
    shares = [pieces(batch_rows, rows) for rows in split_rows(sum(batch_rows), parallelism)]
    read = partial(read_shares, path, shares, schema)
    tasks = session.range(0, len(shares), 1, len(shares))
    with warnings.catch_warnings():
        # mapInArrow checks the pandas version (the engine uses no pandas) and warns about it.
        quiet_pandas_warning()
        return tasks.mapInArrow(read, nullable(schema))


def read_shares(
    path: str, shares: Sequence[Sequence[Piece]], schema: StructType, ids: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """In a worker: the records of the tasks whose numbers arrive in ``ids``, as Spark batches."""
    for id_batch in ids:
        for task in id_batch.column(0).to_pylist():
            yield from read_pieces(path, shares[task], schema)


def read_pieces(path: str, share: Sequence[Piece], schema: StructType) -> Iterator[pa.RecordBatch]:
    """``share`` of the file at ``path``, converted as ``createDataFrame`` converts a table."""
    batches = open_batches(path)
    for piece in share:
        batch = batches[piece.batch].slice(piece.offset, piece.length)
        try:
            batch.validate(full=True)
        except pa.ArrowException as e:
            raise InputDataError(
                f"batch {piece.batch}: invalid Arrow data: {_first_line(e)}", path=path
            ) from e
        table = spark_input_table(pa.Table.from_batches([batch]))
        yield from spark_values(table, schema).to_batches()


def arrow_input(session: SparkSession, path: str, staging: Staging) -> DataFrame:
    """An Arrow IPC input as a DataFrame: read where it lies when the executors can map it
    and its types allow, else staged or handed to ``createDataFrame`` (``arrow_frame``)."""
    if staging.maps(path):
        # As createDataFrame types it (naive timestamps are TIMESTAMP).
        schema = from_arrow_schema(
            spark_input_schema(read_schema(path)), prefer_timestamp_ntz=False
        )
        if stageable(schema):
            return scan_arrow_file(session, path, schema)
    return arrow_frame(session, read_arrow(path), staging)
