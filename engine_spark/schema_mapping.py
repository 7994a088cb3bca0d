"""Arrow types on the way into and out of Spark.

Into Spark (Arrow IPC inputs, before staging or ``createDataFrame``): unsigned integers widen
to the next signed type (``uint64`` to ``int64``: ODF offsets never reach 2^63), large and
dictionary types become their plain forms, and timestamps in any zone or unit become
microsecond UTC.

Out of Spark: Spark keeps timestamps in microseconds; the engine writes every zoned timestamp
as ``timestamp[ms, tz=UTC]`` (truncating), exactly like the reference engine's
``spark.sql.parquet.outputTimestampType=TIMESTAMP_MILLIS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

UTC = "UTC"
OUTPUT_TIMESTAMP = pa.timestamp("ms", tz=UTC)

_WIDER_SIGNED = {
    pa.uint8(): pa.int16(),
    pa.uint16(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.uint64(): pa.int64(),
}


def spark_input_type(t: pa.DataType) -> pa.DataType:
    """The type an Arrow column is converted to before Spark sees it (top level only)."""
    if t in _WIDER_SIGNED:
        return _WIDER_SIGNED[t]
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_large_list(t):
        return pa.list_(t.value_type)
    if pa.types.is_dictionary(t):
        return spark_input_type(t.value_type)
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=UTC if t.tz is not None else None)
    return t


def spark_input_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field's type replaced by its ``spark_input_type``."""
    return pa.schema(
        [f.with_type(spark_input_type(f.type)) for f in schema], metadata=schema.metadata
    )


def spark_input_table(table: pa.Table) -> pa.Table:
    """``table`` with every column cast to ``spark_input_type``."""
    target = spark_input_schema(table.schema)
    if target.equals(table.schema):
        return table
    columns = [
        _cast(col, field.type) if col.type != field.type else col
        for col, field in zip(table.columns, target, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=target)


def output_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A result column as the engine writes it: zoned timestamps become ms UTC."""
    if pa.types.is_timestamp(column.type) and column.type.tz is not None:
        return _cast(column, OUTPUT_TIMESTAMP)
    return column


def _cast(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    safe = not (pa.types.is_timestamp(target) and pa.types.is_timestamp(column.type))
    return column.cast(target, safe=safe)


def result_arrow_schema(result: DataFrame) -> pa.Schema:
    """The Arrow schema ``result.toArrow()`` gives (types and nullability), without a job."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(result.schema, timezone=UTC)
