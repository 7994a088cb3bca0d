"""The logical hash of a Parquet file's records, its top-level fields read and hashed in
parallel.

Each top-level field's leaf columns have SHA3 states of their own until the final record
digest (``record_digest``), so a field can be decoded and hashed on its own thread, from
its own reader over the same bytes, start to end, without waiting for the other fields at
every batch: the threads (``hash_pool``) share the file's decoding and hashing between the
cores, and the largest fields start first. One memory mapping of the file serves every
reader (nothing is copied into Python). Dictionary-coded strings are read as a dictionary
(``reads_as_dictionary``). A file whose top-level fields cannot be told apart by name or by
their leaf columns is read batch by batch instead, every field at once.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from common.hashing.reader_plan import ReaderPlan
from common.hashing.record_digest import FieldDigest, LogicalHasher, walk_fields
from common.hashing.threads import hash_pool
from common.odf.errors import DecodeError, NotFoundError, ValidationError

PARQUET_BATCH_ROWS = 1 << 16
"""Rows decoded per batch when the file is read batch by batch (all fields at once)."""
FIELD_BATCH_ROWS = 1 << 18
"""Rows decoded per batch of one field (a field's batch is small: one column's values)."""

T = TypeVar("T")


def parquet_reader_plan(parquet: pq.ParquetFile) -> ReaderPlan:
    """How the reference reads this file (its row groups, ``reader_plan``)."""
    metadata = parquet.metadata
    return ReaderPlan(tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)))


def hash_parquet_file(
    path: str | Path, *, alongside: Callable[[pa.Buffer], T]
) -> tuple[LogicalHasher, T]:
    """``hash_parquet_data`` of the file at ``path``, memory-mapped; ``alongside`` gets its
    bytes. A missing, irregular or malformed file is refused by name."""
    file = regular_file(path)
    try:
        with pa.memory_map(str(file), "r") as mapped:
            data = mapped.read_buffer()
            return hash_parquet_data(data, alongside=lambda: alongside(data))
    except (pa.ArrowException, OSError) as e:
        raise DecodeError(f"not a readable Parquet file ({e})", path=str(path)) from None


def regular_file(path: str | Path) -> Path:
    """``path``, which must name a regular file."""
    file = Path(path)
    if not file.exists():
        raise NotFoundError(f"{path}: no such file")
    if not file.is_file():
        raise ValidationError("not a regular file", path=str(path))
    return file


def hash_parquet_data(data: pa.Buffer, *, alongside: Callable[[], T]) -> tuple[LogicalHasher, T]:
    """The finished logical hasher of the Parquet file in ``data``, and the result of
    ``alongside`` (another hash of the same bytes), run on the same threads.

    Every thread has finished with ``data`` when this returns or raises. Raises what the
    Parquet reader raises for a malformed file (``pa.ArrowException``, ``OSError``).
    """
    pool = hash_pool()
    other = pool.submit(alongside)
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        hasher = LogicalHasher(parquet.schema_arrow, parquet_reader_plan(parquet))
        groups = field_leaf_columns(parquet)
        if groups is None:
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                hasher.update(batch)
        else:
            costs = [_cost(field) for field in parquet.schema_arrow]
            order = sorted(range(len(groups)), key=lambda i: -costs[i])
            fields = [
                pool.submit(_hash_field, data, parquet, hasher.fields[i], groups[i]) for i in order
            ]
            _results(fields)
        hasher.digest()
    finally:
        concurrent.futures.wait([other])
    return hasher, other.result()


def field_leaf_columns(parquet: pq.ParquetFile) -> list[list[int]] | None:
    """The Parquet leaf columns of each top-level field of the Arrow schema, in order, or
    ``None`` when they cannot be told apart."""
    names = [f.name for f in parquet.schema_arrow]
    groups: list[list[int]] = []
    previous: str | None = None
    for index, path in enumerate(parquet.reader.column_paths):
        if not groups or path[0] != previous:
            groups.append([])
            previous = path[0]
        groups[-1].append(index)
    if len(groups) != len(names) or len(set(names)) != len(names):
        return None
    paths = parquet.reader.column_paths
    if any(paths[g[0]][0] != name for g, name in zip(groups, names, strict=True)):
        return None
    return groups


def _cost(field: pa.Field) -> int:
    """A guess of a field's work per row, to start the largest first: the bytes it hashes
    (read from its type alone: the metadata of many row groups takes long to walk)."""
    leaves = [f.type for f, _, _ in walk_fields([field]) if not pa.types.is_struct(f.type)]
    return sum(_bytes_per_value(t) for t in leaves)


def _bytes_per_value(data_type: pa.DataType) -> int:
    try:
        return max(1, int(data_type.bit_width) // 8)
    except ValueError:  # variable size: a length prefix and the bytes
        return 16


def _hash_field(
    data: pa.Buffer, parquet: pq.ParquetFile, field: FieldDigest, columns: list[int]
) -> None:
    """Read one top-level field from its own reader, start to end, and hash it."""
    dictionary = [field.field.name] if reads_as_dictionary(parquet, field.field, columns) else None
    reader = pq.ParquetFile(
        pa.BufferReader(data), metadata=parquet.metadata, read_dictionary=dictionary
    )
    batches = reader.reader.iter_batches(
        FIELD_BATCH_ROWS,
        row_groups=range(parquet.metadata.num_row_groups),
        column_indices=columns,
        use_threads=False,
    )
    for batch in batches:
        field.update(batch.column(0))


def reads_as_dictionary(parquet: pq.ParquetFile, field: pa.Field, columns: list[int]) -> bool:
    """Is this a string or binary field whose pages are dictionary-coded in every row group?

    Then its values are read as a dictionary (the indices decoded, the strings not) and
    hashed from it (``value_stream.emit_dictionary``): the same bytes for less work. A
    dictionary-coded chunk has a dictionary page and less than the 4 bytes a plain value
    takes at the least per value; were some pages plain after all, the reader would
    dictionary-encode them, slower but alike.
    """
    if not (field.type.equals(pa.string()) or field.type.equals(pa.binary())):
        return False
    metadata = parquet.metadata
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(columns[0])
        if not chunk.has_dictionary_page or chunk.total_uncompressed_size >= 4 * chunk.num_values:
            return False
    return True


def _results(futures: list[concurrent.futures.Future[None]]) -> None:
    """Wait for every future; then raise the first error, if any."""
    concurrent.futures.wait(futures)
    for future in futures:
        future.result()
