"""The logical hash of records (multicodec ``arrow0-sha3-256``), the hash ODF stores in
``DataSlice.logicalHash``: arrow-digest's ``RecordDigestV0<Sha3_256>`` (see ``record_digest``)
over Arrow tables, record batches, streams of batches, or the records of a Parquet file."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from common.hashing.parquet_records import hash_parquet_file, regular_file
from common.hashing.record_digest import LogicalHasher
from common.odf.errors import DecodeError, ValidationError
from common.odf.multihash import Multihash


def logical_hash(
    data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch], schema: pa.Schema | None = None
) -> Multihash:
    """The ``arrow0-sha3-256`` logical hash of records.

    ``schema`` is needed only for an iterable that may be empty; by default it is the schema
    of the table, the batch, or the first batch.
    """
    batches: Iterable[pa.RecordBatch]
    if isinstance(data, pa.Table):
        schema, batches = schema or data.schema, data.to_batches()
    elif isinstance(data, pa.RecordBatch):
        schema, batches = schema or data.schema, [data]
    else:
        iterator = iter(data)
        first = next(iterator, None)
        if first is None and schema is None:
            raise ValidationError("cannot hash an empty stream of record batches without a schema")
        schema = schema or first.schema  # type: ignore[union-attr]
        batches = iterator if first is None else _prepend(first, iterator)
    hasher = LogicalHasher(schema)
    for batch in batches:
        hasher.update(batch)
    return hasher.multihash()


def _prepend(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def logical_hash_parquet(path: str | Path) -> Multihash:
    """The logical hash of the records of a Parquet file (``parquet_records``)."""
    return hash_parquet_records(path).multihash()


def hash_parquet_records(path: str | Path) -> LogicalHasher:
    """The finished logical hasher of a Parquet file's records (the hash, the record count
    and how many struct slots it exposed), its fields hashed in parallel."""
    hasher, _ = hash_parquet_file(path, alongside=lambda _: None)
    return hasher


def open_parquet(path: str | Path) -> pq.ParquetFile:
    """Open a Parquet file, with clear errors for a missing or malformed file."""
    file = regular_file(path)
    try:
        return pq.ParquetFile(file)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        raise DecodeError(f"not a readable Parquet file ({e})", path=str(path)) from None
