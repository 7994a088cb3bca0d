"""The output slice: result validation, system columns and column order (pure pyarrow).

The query result must carry ``event_time`` (TIMESTAMP or DATE) and must not carry ``offset`` or
``system_time``; ``op`` is optional (any integer type) and is passed through, otherwise every
row is an append. Column names are compared case-insensitively, like Spark does. The output is
``offset, op, system_time, event_time, <data columns in query order>`` with the reference
engine's physical types: ``offset`` int64 (not null), ``op`` int32, ``system_time``
``timestamp[ms, UTC]`` (not null), ``event_time`` ``timestamp[ms, UTC]`` or ``date32``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum, IntEnum

import pyarrow as pa
import pyarrow.compute as pc

from common.odf.fragments import DatasetVocabulary
from engine_spark.errors import InvalidQueryError
from engine_spark.schema_mapping import OUTPUT_TIMESTAMP, output_column

EVENT_TIME_TYPES = frozenset({"timestamp", "date"})
OP_TYPES = frozenset({"tinyint", "smallint", "int", "bigint"})


class OutputWriter(Enum):
    """How a row-wise result in input order becomes the output file."""

    STREAM = "stream"
    """Its Arrow batches streamed partition by partition and written by pyarrow
    (``output_stream.py``): bounded memory, Spark's parallelism (the default)."""
    SPARK = "spark"
    """Written by Spark's own Parquet writer, in one task (``output_file.py``): no record
    through the driver (local masters; executors write where the output lies)."""
    COLLECT = "collect"
    """Collected whole into Python, then written (the former path; always so for
    value-sorted results, and for results with ``op`` in place of ``STREAM``)."""


class Op(IntEnum):
    """RFC-015 operation types."""

    APPEND = 0
    RETRACT = 1
    CORRECT_FROM = 2
    CORRECT_TO = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputColumns:
    """Where the system columns are in a query result, and which columns are data."""

    event_time: str
    op: str | None
    data: tuple[str, ...]


def plan_output_columns(
    columns: Sequence[tuple[str, str]], vocab: DatasetVocabulary
) -> OutputColumns:
    """Check a result schema given as ``(name, Spark simple type)`` pairs; raise InvalidQuery."""
    seen: dict[str, str] = {}
    for name, _ in columns:
        if name.lower() in seen:
            raise InvalidQueryError(
                f"the query result has two columns named {name!r}; give them distinct aliases"
            )
        seen[name.lower()] = name
    for system in (vocab.offset_column, vocab.system_time_column):
        if system.lower() in seen:
            raise InvalidQueryError(
                f"the query result has column {seen[system.lower()]!r}, which collides with "
                f"the system column {system!r}; the engine adds it, so select data columns "
                "explicitly instead of *"
            )
    types = {name.lower(): t for name, t in columns}
    event_time = _event_time_column(seen, types, vocab)
    op = seen.get(vocab.operation_type_column.lower())
    if op is not None and types[op.lower()] not in OP_TYPES:
        raise InvalidQueryError(
            f"column {op!r} (operation type) must be an integer (INT), "
            f"got {types[op.lower()].upper()}"
        )
    data = tuple(name for name, _ in columns if name not in (event_time, op))
    return OutputColumns(event_time=event_time, op=op, data=data)


def build_output(
    result: pa.Table,
    columns: OutputColumns,
    vocab: DatasetVocabulary,
    *,
    system_time: datetime,
    next_offset: int,
) -> pa.Table:
    """Add system columns to ``result`` (already in final row order) and order the columns."""
    n = result.num_rows
    ops = (
        normalize_ops(result.column(columns.op), column=columns.op)
        if columns.op is not None
        else pa.repeat(pa.scalar(Op.APPEND.value, pa.int32()), n)
    )
    fields = [
        pa.field(vocab.offset_column, pa.int64(), nullable=False),
        pa.field(vocab.operation_type_column, pa.int32()),
        pa.field(vocab.system_time_column, OUTPUT_TIMESTAMP, nullable=False),
    ]
    arrays: list[pa.Array | pa.ChunkedArray] = [
        offsets(next_offset, n),
        ops,
        pa.repeat(pa.scalar(system_time, OUTPUT_TIMESTAMP), n),
    ]
    for name in (columns.event_time, *columns.data):
        field = result.schema.field(name)
        column = output_column(result.column(name))
        out_name = vocab.event_time_column if name == columns.event_time else name
        fields.append(pa.field(out_name, column.type, nullable=field.nullable))
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def offsets(start: int, n: int) -> pa.Array:
    """``start, start + 1, ..., start + n - 1`` as int64, computed in Arrow (a Python range of
    a million integers takes ~30x longer)."""
    ones = pa.repeat(pa.scalar(1, pa.int64()), n)
    return pc.add(pc.cumulative_sum(ones), pa.scalar(start - 1, pa.int64()))


def normalize_ops(values: pa.ChunkedArray, *, column: str) -> pa.Array:
    """Check passed-through operation types and repair corrections a query split apart.

    Values must be 0..3 and not null. A correct-from (-C) that is not immediately followed by a
    correct-to (+C) becomes a retraction (-R), and a +C without its -C becomes an append (+A):
    that is what a filter keeping only one half of a correction means, and a -R followed by a
    +A elsewhere is an equivalent changelog encoding of the same correction.
    """
    if values.null_count:
        raise InvalidQueryError(f"column {column!r} (operation type) has null values")
    wide = values.cast(pa.int64())
    if pc.all(pc.equal(wide, Op.APPEND.value)).as_py() is not False:
        return pa.array(wide.cast(pa.int32()).combine_chunks())
    ops = wide.to_pylist()
    for row, op in enumerate(ops):
        if op not in (0, 1, 2, 3):
            raise InvalidQueryError(
                f"column {column!r} has operation type {op} at result row {row}; valid types are "
                "0 (append), 1 (retract), 2 (correct-from), 3 (correct-to)"
            )
    repaired = list(ops)
    for row, op in enumerate(ops):
        if op == Op.CORRECT_FROM and (row + 1 >= len(ops) or ops[row + 1] != Op.CORRECT_TO):
            repaired[row] = Op.RETRACT.value
        elif op == Op.CORRECT_TO and (row == 0 or ops[row - 1] != Op.CORRECT_FROM):
            repaired[row] = Op.APPEND.value
    return pa.array(repaired, pa.int32())


def _event_time_column(
    seen: dict[str, str], types: dict[str, str], vocab: DatasetVocabulary
) -> str:
    key = vocab.event_time_column.lower()
    if key not in seen:
        raise InvalidQueryError(
            f"the query result has no {vocab.event_time_column!r} column; every output row "
            "needs an event time (TIMESTAMP or DATE)"
        )
    if types[key] not in EVENT_TIME_TYPES:
        raise InvalidQueryError(
            f"column {seen[key]!r} must be TIMESTAMP or DATE (UTC), got {types[key].upper()}"
        )
    return seen[key]
