"""A dataset's records written out for tools outside ODF (``odf export``).

The records of every data slice, in offset order, as Parquet, CSV or NDJSON: one file, or a
directory of files of at most ``partition_size`` records each (``part-00000.csv``...). The
output appears whole or not at all: it is written next to its destination and renamed into
place at the end; an existing destination is refused.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from common.odf.errors import ValidationError
from coordinator.dataset import Dataset
from coordinator.ingest.context import data_files
from coordinator.tempdirs import remove_tree

BATCH_ROWS = 64 * 1024


class ExportFormat(enum.Enum):
    PARQUET = "parquet"
    CSV = "csv"
    NDJSON = "ndjson"


@dataclass(frozen=True, slots=True)
class Exported:
    path: Path
    files: int
    records: int


def export_dataset(
    dataset: Dataset, fmt: ExportFormat, output: Path, *, partition_size: int | None = None
) -> Exported:
    """Write ``dataset``'s records to ``output`` (see the module doc)."""
    if output.exists() or output.is_symlink():
        raise ValidationError("already exists (export never overwrites)", path=str(output))
    if partition_size is not None and partition_size < 1:
        raise ValidationError("must be at least 1", path="--partition-size")
    state = dataset.state()
    schema = state.arrow_schema()
    if schema is None:
        raise ValidationError(f"dataset {dataset.alias!r} has no schema yet: nothing to export")
    partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
    try:
        if partition_size is None:
            records = _write(fmt, partial, schema, _batches(dataset, schema))
            files = 1
        else:
            partial.mkdir(parents=True)
            files = records = 0
            for part in _parts(_batches(dataset, schema), partition_size):
                name = f"part-{files:05d}.{fmt.value}"
                records += _write(fmt, partial / name, schema, iter(part))
                files += 1
        os.rename(partial, output)
    except BaseException:
        if partial.is_dir():
            remove_tree(partial)
        else:
            partial.unlink(missing_ok=True)
        raise
    return Exported(output, files, records)


def _batches(dataset: Dataset, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Every slice in offset order, in the dataset's current schema (older slices lack the
    columns added since: they are NULL there)."""
    for path in data_files(dataset, dataset.head()):
        table = pq.read_table(path)
        missing = [f for f in schema if f.name not in table.column_names]
        for f in missing:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
        table = table.select(schema.names).cast(schema)
        yield from table.to_batches(max_chunksize=BATCH_ROWS)


def _parts(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[list[pa.RecordBatch]]:
    """Batches regrouped into parts of exactly ``size`` records (the last may be shorter)."""
    part: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        while batch.num_rows:
            take = min(size - count, batch.num_rows)
            part.append(batch.slice(0, take))
            batch = batch.slice(take)
            count += take
            if count == size:
                yield part
                part, count = [], 0
    if part:
        yield part


def _write(fmt: ExportFormat, path: Path, schema: pa.Schema, batches: Iterator[Any]) -> int:
    records = 0
    if fmt is ExportFormat.PARQUET:
        with pq.ParquetWriter(path, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                records += batch.num_rows
    elif fmt is ExportFormat.CSV:
        with pacsv.CSVWriter(str(path), schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                records += batch.num_rows
    else:
        with open(path, "w", encoding="utf-8") as out:
            for batch in batches:
                records += _write_ndjson(out, batch)
    return records


def _write_ndjson(out: TextIO, batch: pa.RecordBatch) -> int:
    for row in batch.to_pylist():
        out.write(json.dumps(row, default=_json_value, ensure_ascii=False) + "\n")
    return int(batch.num_rows)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
