"""ReadStep::Parquet: the file's columns as they are, or selected by name and cast to the DDL
schema (columns not listed are dropped). Streamed batch by batch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from common.odf.fragments import ReadStepParquet
from coordinator.ingest.ddl import parse_read_schema
from coordinator.ingest.errors import ReadError
from coordinator.ingest.readers.stream import BATCH_ROWS, DataStream


def read_parquet(step: ReadStepParquet, path: Path, *, name: str) -> DataStream:
    try:
        file = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise ReadError(f"not a readable Parquet file: {e}", path=name) from None
    if not step.schema:
        return DataStream(file.schema_arrow, _batches(file, None, name))
    schema = parse_read_schema(step.schema)
    present = set(file.schema_arrow.names)
    for field in schema:
        if field.name not in present:
            raise ReadError(f"column {field.name!r} is not in the file", path=name)
    return DataStream(schema, _cast_batches(_batches(file, schema.names, name), schema, name))


def _batches(
    file: pq.ParquetFile, columns: list[str] | None, name: str
) -> Iterator[pa.RecordBatch]:
    try:
        yield from file.iter_batches(batch_size=BATCH_ROWS, columns=columns)
    except (pa.ArrowInvalid, OSError) as e:
        raise ReadError(f"corrupt Parquet data: {e}", path=name) from None
    finally:
        file.close()


def _cast_batches(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, name: str
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        columns = []
        for field, column in zip(schema, batch.columns, strict=True):
            try:
                columns.append(column.cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ReadError(
                    f"column {field.name!r}: cannot convert {column.type} to {field.type}: {e}",
                    path=name,
                ) from None
            if not field.nullable and columns[-1].null_count:
                raise ReadError(f"column {field.name!r}: NULL in a NOT NULL column", path=name)
        yield pa.RecordBatch.from_arrays(columns, schema=schema)
