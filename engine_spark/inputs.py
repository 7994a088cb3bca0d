"""Input slices as Spark DataFrames, registered as temp views under their query aliases.

Each input's files are read with the schema of its ``schema_file`` (the newest file, so
columns added later read as null in older files) and filtered to the request's offset
interval (unless their footers show they hold just its records, ``offset_bounds.py``); rows
reach the query in offset order (a backlog of several files is brought into one partition
and sorted by offset locally, as the reference engine does, with no shuffle).
An input without new data (no interval) is an empty DataFrame with that schema. Parquet files
are read by Spark itself, all of an input's in one scan; Arrow IPC files are restaged as
Parquet (``staging.py``; on a cluster without shared storage, handed to ``createDataFrame``)
or, with ``ArrowInputs.IN_PLACE``, read where they lie by the tasks of a ``mapInArrow``
(``arrow_scan.py``). An Arrow IPC file whose column types disagree
with the input's schema is refused.

Spark timestamps have microsecond precision and its Parquet reader rejects nanosecond
timestamps (what pyarrow writes by default, e.g. ingested ``timestamp[ns, tz=UTC]`` columns).
Such columns are scanned as their raw INT64 and converted to microseconds, truncating like
pyarrow's cast of Arrow IPC inputs; files whose footers store different columns in
nanoseconds are scanned separately.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from common.odf.engine_protocol import TransformRequestInput
from common.odf.fragments import OffsetInterval
from engine_spark.arrow_scan import arrow_input, nullable
from engine_spark.errors import InputDataError
from engine_spark.exchange import DataFormat, detect_format, read_schema
from engine_spark.offset_bounds import holds_exactly
from engine_spark.schema_mapping import spark_input_schema, spark_input_table
from engine_spark.staging import Staging


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier for any name (``org.example.data`` -> ```org.example.data```)."""
    return "`" + name.replace("`", "``") + "`"


def register_view(df: DataFrame, name: str) -> None:
    df.createOrReplaceTempView(quote_identifier(name))


def load_input(session: SparkSession, inp: TransformRequestInput, staging: Staging) -> DataFrame:
    """The new records of one input, in offset order."""
    schema = file_schema(session, inp.schema_file)
    if inp.offset_interval is None or not inp.data_paths:
        return session.createDataFrame([], schema)
    df = read_files(session, inp.data_paths, schema, staging)
    if not holds_exactly(inp.data_paths, inp.vocab.offset_column, inp.offset_interval):
        df = filter_interval(df, inp.vocab.offset_column, inp.offset_interval)
    if len(inp.data_paths) > 1:
        # Spark packs small files into partitions by size, not in order: one partition,
        # sorted locally by offset, restores the order without a shuffle.
        df = df.coalesce(1).sortWithinPartitions(quote_identifier(inp.vocab.offset_column))
    return df


def load_dataset(
    session: SparkSession, paths: Sequence[str], schema: pa.Schema | None, staging: Staging
) -> DataFrame:
    """All records of a dataset's files (ad-hoc queries), with the newest file's schema.

    Without files, an empty DataFrame with ``schema`` (a dataset with a schema but no data
    yet); with neither, a ``ValueError``.
    """
    if paths:
        return read_files(session, paths, file_schema(session, paths[-1]), staging)
    if schema is None:
        raise ValueError("an input needs data files or a schema")
    return empty_input(session, schema)


def read_files(
    session: SparkSession, paths: Sequence[str], schema: StructType, staging: Staging
) -> DataFrame:
    """Data files of any format with ``schema``: all Parquet files in one scan, Arrow IPC files
    one by one. Rows are not in file order (Spark packs files into partitions by size)."""
    parquet = [p for p in paths if detect_format(p) is DataFormat.PARQUET]
    frames = [read_parquet(session, parquet, schema)] if parquet else []
    frames += [read_file(session, p, schema, staging) for p in paths if p not in parquet]
    return union_in_order(frames)


def load_files(session: SparkSession, paths: Sequence[str], staging: Staging) -> DataFrame:
    """Several files as one DataFrame in file order (raw queries: the ``input`` view)."""
    if not paths:
        raise ValueError("a raw query needs at least one input file")
    schema = file_schema(session, paths[-1])
    return union_in_order([read_file(session, path, schema, staging) for path in paths])


def union_in_order(frames: Sequence[DataFrame]) -> DataFrame:
    """``UNION ALL`` of ``frames`` keeping their order, as a balanced tree.

    A backlog can be thousands of files; a left-deep chain of unions that deep is slow to
    analyze, a balanced one is not (Spark flattens it into one n-ary union either way).
    """
    level = list(frames)
    while len(level) > 1:
        level = [
            level[i].union(level[i + 1]) if i + 1 < len(level) else level[i]
            for i in range(0, len(level), 2)
        ]
    return level[0]


def empty_input(session: SparkSession, schema: pa.Schema) -> DataFrame:
    """An empty DataFrame with the Spark form of an Arrow schema."""
    return session.createDataFrame(spark_input_table(schema.empty_table()))


def file_schema(session: SparkSession, path: str) -> StructType:
    """The Spark schema of a data file (Parquet footer or Arrow IPC schema), reading no rows.

    pyarrow reads the footer in microseconds where Spark's schema inference takes a job-like
    round trip; the Arrow-to-Spark type mapping is PySpark's own.
    """
    return from_arrow_schema(spark_input_schema(read_schema(path)))


def read_file(session: SparkSession, path: str, schema: StructType, staging: Staging) -> DataFrame:
    """One data file as a DataFrame with ``schema`` (missing columns are null)."""
    if detect_format(path) is DataFormat.PARQUET:
        return read_parquet(session, [path], schema)
    check_column_types(path, file_schema(session, path), schema)
    df = arrow_input(session, path, staging)
    present = set(df.columns)
    return df.select(
        *[
            F.col(quote_identifier(f.name)) if f.name in present else F.lit(None).cast(f.dataType)
            for f in schema.fields
        ]
    ).toDF(*schema.fieldNames())


def check_column_types(path: str, found: StructType, schema: StructType) -> None:
    """Refuse a file whose columns have other types than ``schema`` gives them (nullability
    aside); columns it lacks read as null, columns ``schema`` lacks are not read."""
    wanted = {f.name: f.dataType for f in schema.fields}
    for field in found.fields:
        want = wanted.get(field.name)
        if want is not None and nullable(want) != nullable(field.dataType):
            raise InputDataError(
                f"column {field.name!r} is {field.dataType.simpleString()}, but the input's"
                f" schema says {want.simpleString()}",
                path=path,
            )


def read_parquet(session: SparkSession, paths: Sequence[str], schema: StructType) -> DataFrame:
    """Parquet files with ``schema``: one scan per set of nanosecond columns (usually one).

    Rows of different scans are not interleaved in file order: callers that need the order
    sort by offset (``load_input``) or read one file at a time (``load_files``).
    """
    groups: dict[frozenset[str], list[str]] = {}
    for path in paths:
        groups.setdefault(nanosecond_columns(read_schema(path), schema), []).append(path)
    return union_in_order(
        [_scan_parquet(session, group, schema, nanos) for nanos, group in groups.items()]
    )


def nanosecond_columns(file_schema: pa.Schema, schema: StructType) -> frozenset[str]:
    """The columns of ``schema`` that a file stores as nanosecond timestamps (top level)."""
    wanted = set(schema.fieldNames())
    return frozenset(
        f.name
        for f in file_schema
        if f.name in wanted and pa.types.is_timestamp(f.type) and f.type.unit == "ns"
    )


def _scan_parquet(
    session: SparkSession, paths: Sequence[str], schema: StructType, nanos: frozenset[str]
) -> DataFrame:
    if not nanos:
        return session.read.schema(schema).parquet(*paths)
    raw = StructType(
        [StructField(f.name, LongType(), f.nullable) if f.name in nanos else f for f in schema]
    )
    df = session.read.schema(raw).parquet(*paths)
    return df.select(
        *[
            _nanos_to_timestamp(f) if f.name in nanos else F.col(quote_identifier(f.name))
            for f in schema
        ]
    )


def _nanos_to_timestamp(field: StructField) -> Column:
    """Raw INT64 nanoseconds as ``field``'s (microsecond) timestamp type, truncated."""
    micros = F.expr(f"timestamp_micros({quote_identifier(field.name)} div 1000)")
    return micros.cast(field.dataType).alias(field.name)


def filter_interval(df: DataFrame, offset_column: str, interval: OffsetInterval) -> DataFrame:
    """The rows in ``interval``. Its bounds change with every transaction: they are kept out
    of the generated code (``stable_literal``), at the cost of Parquet row-group pruning by
    offset, which a data file holding one block's records rarely allows anyway."""
    offset = F.col(quote_identifier(offset_column))
    return df.where(
        offset.between(stable_literal(interval.start, offset), stable_literal(interval.end, offset))
    )


def stable_literal(value: datetime | int, anchor: Column) -> Column:
    """``value`` as a constant that Spark does not write into its generated code.

    Spark inlines timestamp and integer literals into the Java code it generates for a query
    stage, and compiles a stage anew whenever its code differs: bounds that move with every
    transaction would cost a compilation every time (~70 ms measured for a window aggregation
    over 100k records). An array literal is passed to the generated code as an object, so the
    code stays the same; reading its element at an index computed from a column of the row
    (``anchor``, a number or timestamp; the index is always 1) keeps the optimizer from
    folding it back into a literal."""
    if isinstance(value, datetime):  # a TIMESTAMP or DATE anchor (a DATE event time)
        anchor = F.unix_micros(anchor.cast("timestamp"))
    index = F.coalesce(anchor * 0, F.lit(0)) + 1
    return F.element_at(F.array(F.lit(value)), index.cast("int"))
