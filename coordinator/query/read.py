"""A dataset's records as they are at its head or at an earlier block (``odf.Connection.read``).

Read straight from the dataset's Parquet data files (no engine), oldest first, streamed one
record batch at a time: a dataset larger than memory can be read through the returned reader.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.dataset import Dataset
from coordinator.ingest.context import data_files
from coordinator.query.runner import block_as_of

BATCH_ROWS = 64 * 1024


def read_records(ds: Dataset, as_of: str | None = None) -> pa.RecordBatchReader:
    """The records of ``ds`` oldest first, as of ``as_of`` (a block hash, a unique prefix of
    one, or an RFC 3339 time; default: the head), in the dataset's current schema (a column
    added later reads as nulls in older files)."""
    state = ds.state()
    head = state.head if as_of is None else block_as_of(ds, as_of)
    schema = state.arrow_schema() or pa.schema([])
    return pa.RecordBatchReader.from_batches(schema, _batches(data_files(ds, head), schema))


def _batches(files: list[Path], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for path in files:
        with pq.ParquetFile(path) as f:
            for batch in f.iter_batches(batch_size=BATCH_ROWS):
                yield _conformed(batch, schema)


def _conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    columns = [
        batch.column(field.name).cast(field.type)
        if field.name in batch.schema.names
        else pa.nulls(batch.num_rows, field.type)
        for field in schema
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
