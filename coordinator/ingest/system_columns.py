"""The data writer's column rules: input validation, normalisation and the output layout.

Output columns, as the reference writes them: ``offset`` (Int64, nullable), ``op`` (Int32),
``system_time`` (Timestamp ms UTC), ``event_time`` (Timestamp ms UTC, or Date32/Date64 when
the source gives dates), then the data columns in their merged order. Every top-level
timestamp column is normalised to milliseconds UTC (truncating toward zero, as the
reference's cast does).
"""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from common.arrow_values import timestamp_scalar
from common.odf.fragments import DatasetVocabulary
from coordinator.ingest.errors import BadInputSchemaError
from coordinator.ingest.readers.temporal import is_temporal

OFFSET_TYPE = pa.int64()
OP_TYPE = pa.int32()
TIME_TYPE = pa.timestamp("ms", tz="UTC")


class Op:
    """Values of the ``op`` column (RFC-015)."""

    APPEND = 0
    RETRACT = 1
    CORRECT_FROM = 2
    CORRECT_TO = 3


def validate_input(schema: pa.Schema, vocab: DatasetVocabulary, *, source: str) -> None:
    """Reject data that brings its own system columns or an event time that is not a time."""
    for column in (vocab.offset_column, vocab.operation_type_column, vocab.system_time_column):
        if column in schema.names:
            raise BadInputSchemaError(
                f"the data has a column {column!r}, which is a system column", path=source
            )
    if vocab.event_time_column in schema.names:
        dtype = schema.field(vocab.event_time_column).type
        if not is_temporal(dtype):
            raise BadInputSchemaError(
                f"event time column {vocab.event_time_column!r} must be a DATE or TIMESTAMP,"
                f" got {dtype}",
                path=source,
            )


def normalized_type(dtype: pa.DataType) -> pa.DataType:
    return TIME_TYPE if pa.types.is_timestamp(dtype) else dtype


def normalized_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema(
        [f.with_type(normalized_type(f.type)) for f in schema], metadata=schema.metadata
    )


def normalize_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with its top-level timestamps as ms UTC (``schema`` = normalized_schema)."""
    columns = [
        c if c.type.equals(f.type) else c.cast(f.type, safe=False)
        for c, f in zip(batch.columns, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def event_time_field(schema: pa.Schema, column: str, prev_type: pa.DataType | None) -> pa.Field:
    """The event-time field of the data: its own, or a synthesised nullable one."""
    if column in schema.names:
        return schema.field(column)
    return pa.field(column, prev_type or TIME_TYPE, nullable=True)


def fill_event_time(column: pa.Array, fallback: datetime) -> pa.Array:
    """NULL event times replaced by ``fallback`` (its UTC day for a date column)."""
    if column.null_count == 0:
        return column
    value = timestamp_scalar(fallback, TIME_TYPE)
    if not column.type.equals(TIME_TYPE):
        value = value.cast(column.type)
    return pc.fill_null(column, value)


def output_schema(data: pa.Schema, vocab: DatasetVocabulary, event_time: pa.Field) -> pa.Schema:
    """The slice's schema: system columns first, then ``data`` minus op and event time."""
    skip = {vocab.operation_type_column, vocab.event_time_column}
    return pa.schema(
        [
            pa.field(vocab.offset_column, OFFSET_TYPE, nullable=True),
            pa.field(vocab.operation_type_column, OP_TYPE, nullable=False),
            pa.field(vocab.system_time_column, TIME_TYPE, nullable=False),
            event_time,
            *(f for f in data if f.name not in skip),
        ]
    )


def same_schema(a: pa.Schema, b: pa.Schema) -> bool:
    """Equal names, types and field metadata in order; nullability ignored (as the reference)."""
    if len(a) != len(b):
        return False
    return all(
        f.name == g.name and f.type.equals(g.type) and (f.metadata or {}) == (g.metadata or {})
        for f, g in zip(a, b, strict=True)
    )
