"""The logical hash of records: arrow-digest ``RecordDigestV0<Sha3_256>`` (multicodec
``arrow0-sha3-256``), the hash ODF stores in ``DataSlice.logicalHash``.

1. Fields are walked depth-first (a struct, then its children one level deeper). For each
   field its name (``u64`` LE byte length, then the UTF-8 bytes) and its nesting level
   (``u64`` LE) go into the record hasher. Nullability and metadata are not hashed.
2. Every non-struct field is a leaf column with its own SHA3-256 hasher, seeded with the bytes
   of its data type (``data_types``) and fed its rows batch after batch (``value_stream``).
   Structs are flattened: a leaf inherits its parents' validity (``validity``).
3. The digest is the record hasher fed with each leaf column's digest, in walk order.

Each column is hashed incrementally, so the result does not depend on how the rows are split
into batches, nor on dictionary encoding or ``utf8``/``large_utf8``-style encodings.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from common.hashing.data_types import data_type_bytes
from common.hashing.validity import Mask, combine_with_parent, own_validity
from common.hashing.value_stream import emit_values
from common.odf.errors import DecodeError, NotFoundError, ValidationError
from common.odf.multihash import ARROW0_SHA3_256, Multihash

PARQUET_BATCH_ROWS = 1 << 16


class _ColumnDigest:
    """The hasher of one leaf column (``ArrayDigestV0``)."""

    def __init__(self, path: str, data_type: pa.DataType) -> None:
        self.path = path
        self.signature = data_type_bytes(data_type, path)
        self._hasher = hashlib.sha3_256(self.signature)

    def update(self, array: pa.Array, parent: Mask, first_row: int) -> None:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        own = own_validity(array)
        valid = combine_with_parent(parent, own, first_row)
        blank = None
        if own is not None and parent is not None:
            blank = normalized_blank(valid, own)
        emit_values(array, valid, blank, self._hasher.update)

    def digest(self) -> bytes:
        return self._hasher.digest()


def normalized_blank(valid: Mask, own: npt.NDArray[np.bool_]) -> Mask:
    """Rows that hash as valid although the array marks them null."""
    blank = ~own if valid is None else valid & ~own
    return blank if bool(blank.any()) else None


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def _walk_fields(
    fields: Iterable[pa.Field], level: int, prefix: str
) -> Iterator[tuple[pa.Field, int, str]]:
    for field in fields:
        path = f"{prefix}{field.name}"
        yield field, level, path
        if pa.types.is_struct(field.type):
            yield from _walk_fields(field.type.fields, level + 1, f"{path}.")


def _walk_leaves(
    arrays: Iterable[pa.Array], fields: Iterable[pa.Field], parent: Mask, first_row: int
) -> Iterator[tuple[pa.Array, Mask]]:
    for array, field in zip(arrays, fields, strict=True):
        if pa.types.is_struct(field.type):
            combined = combine_with_parent(parent, own_validity(array), first_row)
            children = [array.field(i) for i in range(array.type.num_fields)]
            yield from _walk_leaves(children, field.type.fields, combined, first_row)
        else:
            yield array, parent


class LogicalHasher:
    """Incremental logical hash of record batches that share one schema."""

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema
        self._names = hashlib.sha3_256()
        self._columns: list[_ColumnDigest] = []
        for field, level, path in _walk_fields(schema, 0, ""):
            name = field.name.encode()
            self._names.update(_u64(len(name)) + name + _u64(level))
            if not pa.types.is_struct(field.type):
                self._columns.append(_ColumnDigest(path, field.type))
        self._signature = _signature(schema)
        self._rows = 0

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def update(self, batch: pa.RecordBatch) -> None:
        if batch.schema is not self._schema and _signature(batch.schema) != self._signature:
            raise ValidationError(
                f"record batch schema {_describe(batch.schema)} does not match the hashed "
                f"schema {_describe(self._schema)}"
            )
        leaves = _walk_leaves(batch.columns, self._schema, None, self._rows)
        for column, (array, parent) in zip(self._columns, leaves, strict=True):
            column.update(array, parent, self._rows)
        self._rows += batch.num_rows

    def digest(self) -> bytes:
        final = self._names.copy()
        for column in self._columns:
            final.update(column.digest())
        return final.digest()

    def multihash(self) -> Multihash:
        return Multihash(ARROW0_SHA3_256, self.digest())


def _signature(schema: pa.Schema) -> list[tuple[str, int, bytes]]:
    """What the hash sees of a schema: field names, levels and leaf type bytes."""
    return [
        (path, level, b"" if pa.types.is_struct(f.type) else data_type_bytes(f.type, path))
        for f, level, path in _walk_fields(schema, 0, "")
    ]


def _describe(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"


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
    """The logical hash of the records of a Parquet file, read batch by batch."""
    parquet = open_parquet(path)
    with parquet:
        hasher = LogicalHasher(parquet.schema_arrow)
        try:
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                hasher.update(batch)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
            raise DecodeError(f"cannot read Parquet data: {e}", path=str(path)) from None
    return hasher.multihash()


def open_parquet(path: str | Path) -> pq.ParquetFile:
    """Open a Parquet file, with clear errors for a missing or malformed file."""
    file = Path(path)
    if not file.exists():
        raise NotFoundError(f"{path}: no such file")
    if not file.is_file():
        raise ValidationError("not a regular file", path=str(path))
    try:
        return pq.ParquetFile(file)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        raise DecodeError(f"not a readable Parquet file ({e})", path=str(path)) from None
