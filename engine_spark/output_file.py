"""The output slice written by Spark's own Parquet writer: no record passes through the driver.

A row-wise result in input order is written by one Spark task as the final Parquet file, system
columns included: the result is coalesced into one partition (without a shuffle: its rows stay
in input order), ``offset`` is the next offset plus ``monotonically_increasing_id()`` (the row's
index within that single partition), ``op`` is 0 and ``system_time`` the request's. The writer
streams row groups to disk, so memory stays bounded whatever the result's size, and the
driver and Python only see the file's footer. The file goes to a fresh directory next to the
target and its single part file is renamed into place, so a failed write leaves nothing at
the path the coordinator checks.

Only results whose Parquet form reads back exactly as the collect path writes it take this
path (``spark_writable``): flat columns of plain types (timestamps are written in
milliseconds, as ``spark.sql.parquet.outputTimestampType`` says). Anything else (nested
types, ``op`` columns to check and repair, Arrow IPC outputs, value-sorted results) is
collected and written by pyarrow (``outputs.build_output``).

On a cluster (``parallel``: the output lies in the shared staging directory) coalescing would
run the whole query in one task. There the result keeps its partitions: each row is tagged
with ``monotonically_increasing_id()`` where it is computed (partition index, then row index:
input order), the rows are shuffled into one partition and sorted by that tag there (Spark's
external sort: spills to disk, bounded memory), and that one task numbers and writes them as
above. The query runs on every executor; only the final write is one task, as one Parquet
file per slice requires. The driver still sees only the footer.

The bounds that change with every transaction (next offset, system time) are kept out of
Spark's generated code (``inputs.stable_literal``), so the stage is not compiled anew per
transaction.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    StructType,
)

from common.odf.fragments import DatasetVocabulary
from engine_spark.exchange import FILE_MODE, PARQUET_COMPRESSION, DataFormat, output_format
from engine_spark.inputs import quote_identifier, stable_literal
from engine_spark.outputs import Op, OutputColumns
from engine_spark.staging import PLAIN_TYPES

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def spark_writable(schema: StructType, columns: OutputColumns, path: str) -> bool:
    """Whether Spark's writer gives the same output file as the collect path (module doc)."""
    return (
        output_format(path) is DataFormat.PARQUET
        and columns.op is None
        # Exact classes: a collated StringType or TimestampNTZType is not promised the same.
        and all(type(f.dataType) in PLAIN_TYPES for f in schema.fields)
    )


def output_frame(
    result: DataFrame,
    columns: OutputColumns,
    vocab: DatasetVocabulary,
    *,
    system_time: datetime,
    next_offset: int,
) -> DataFrame:
    """``result`` in one partition, with the system columns, in the output's column order."""
    row = F.monotonically_increasing_id()
    return result.coalesce(1).select(
        (row + F.coalesce(stable_literal(next_offset, row), F.lit(0))).alias(vocab.offset_column),
        # Nullable, as the collect path writes it (a CASE without ELSE may be null).
        F.when(row >= 0, F.lit(Op.APPEND.value)).alias(vocab.operation_type_column),
        _not_null(stable_literal(system_time, F.timestamp_micros(row))).alias(
            vocab.system_time_column
        ),
        _column(columns.event_time).alias(vocab.event_time_column),
        *[_column(name) for name in columns.data],
    )


def write_output(
    result: DataFrame,
    columns: OutputColumns,
    vocab: DatasetVocabulary,
    *,
    system_time: datetime,
    next_offset: int,
    path: str,
    parallel: bool = False,
) -> int:
    """Write the output slice at ``path``; returns its records (none: no file is left).
    ``parallel``: the query keeps its partitions; its rows are brought into order in the
    writing task (module doc)."""
    if parallel:
        result = in_one_ordered_partition(result)
    frame = output_frame(result, columns, vocab, system_time=system_time, next_offset=next_offset)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".spark", dir=target.parent))
    try:
        out = work / "out"
        frame.write.option("compression", PARQUET_COMPRESSION).parquet(str(out))
        parts = sorted(out.glob("part-*"))
        if len(parts) > 1:
            raise RuntimeError(f"Spark wrote {len(parts)} files for one partition under {out}")
        rows = pq.read_metadata(parts[0]).num_rows if parts else 0
        if rows:
            os.chmod(parts[0], FILE_MODE)
            os.replace(parts[0], target)
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def in_one_ordered_partition(result: DataFrame) -> DataFrame:
    """``result`` computed in its own partitions, then shuffled into one partition in the
    order of its partitions and rows (an extra tag column, which ``output_frame`` drops)."""
    taken = {c.lower() for c in result.columns}
    tag = next(
        name for i in range(len(taken) + 1) if (name := f"__odf_row_{i}").lower() not in taken
    )
    tagged = result.withColumn(tag, F.monotonically_increasing_id())
    return tagged.repartition(1).sortWithinPartitions(quote_identifier(tag))


def _column(name: str) -> Column:
    return F.col(quote_identifier(name))


def _not_null(value: Column) -> Column:
    """``value`` (never null) typed as not nullable; the fallback constant never changes."""
    return F.coalesce(value, F.lit(_EPOCH))
