"""Input slices as Spark DataFrames, registered as temp views under their query aliases.

Each input's files (oldest first) are read with the schema of its ``schema_file`` (the newest
file, so columns added later read as null in older files), one DataFrame per file, unioned in
order and filtered to the request's offset interval: rows reach the query in offset order. An
input without new data (no interval) is an empty DataFrame with that schema. Parquet files are
read by Spark itself; Arrow IPC files are memory-mapped by pyarrow and handed to Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from common.odf.engine_protocol import TransformRequestInput
from common.odf.fragments import OffsetInterval
from engine_spark.exchange import DataFormat, detect_format, read_arrow, read_schema
from engine_spark.schema_mapping import spark_input_schema, spark_input_table


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier for any name (``org.example.data`` -> ```org.example.data```)."""
    return "`" + name.replace("`", "``") + "`"


def register_view(df: DataFrame, name: str) -> None:
    df.createOrReplaceTempView(quote_identifier(name))


def load_input(session: SparkSession, inp: TransformRequestInput) -> DataFrame:
    """The new records of one input, in offset order."""
    schema = file_schema(session, inp.schema_file)
    if inp.offset_interval is None or not inp.data_paths:
        return session.createDataFrame([], schema)
    frames = [read_file(session, path, schema) for path in inp.data_paths]
    df = reduce(DataFrame.union, frames)
    return filter_interval(df, inp.vocab.offset_column, inp.offset_interval)


def load_files(session: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Several files as one DataFrame in file order (raw queries: the ``input`` view)."""
    if not paths:
        raise ValueError("a raw query needs at least one input file")
    schema = file_schema(session, paths[-1])
    frames = [read_file(session, path, schema) for path in paths]
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def empty_input(session: SparkSession, schema: pa.Schema) -> DataFrame:
    """An empty DataFrame with the Spark form of an Arrow schema."""
    return session.createDataFrame(spark_input_table(schema.empty_table()))


def file_schema(session: SparkSession, path: str) -> StructType:
    """The Spark schema of a data file (Parquet footer or Arrow IPC schema), reading no rows.

    pyarrow reads the footer in microseconds where Spark's schema inference takes a job-like
    round trip; the Arrow-to-Spark type mapping is PySpark's own.
    """
    return from_arrow_schema(spark_input_schema(read_schema(path)))


def read_file(session: SparkSession, path: str, schema: StructType) -> DataFrame:
    """One data file as a DataFrame with ``schema`` (missing columns are null)."""
    if detect_format(path) is DataFormat.PARQUET:
        return session.read.schema(schema).parquet(path)
    df = session.createDataFrame(spark_input_table(read_arrow(path)))
    present = set(df.columns)
    return df.select(
        *[
            F.col(quote_identifier(f.name)) if f.name in present else F.lit(None).cast(f.dataType)
            for f in schema.fields
        ]
    ).toDF(*schema.fieldNames())


def filter_interval(df: DataFrame, offset_column: str, interval: OffsetInterval) -> DataFrame:
    offset = F.col(quote_identifier(offset_column))
    return df.where(
        offset.between(F.lit(interval.start).cast("bigint"), F.lit(interval.end).cast("bigint"))
    )
