"""The record hasher: arrow-digest ``RecordDigestV0<Sha3_256>``.

1. Fields are walked depth-first (a struct, then its children one level deeper). For each
   field its name (``u64`` LE byte length, then the UTF-8 bytes) and its nesting level
   (``u64`` LE) go into the record hasher. Nullability and metadata are not hashed.
2. Every non-struct field is a leaf column with its own SHA3-256 hasher, seeded with the bytes
   of its data type (``data_types``) and fed its rows batch after batch (``value_stream``).
   Structs are flattened: a leaf inherits its parents' validity (``validity``).
3. The digest is the record hasher fed with each leaf column's digest, in walk order.

Columns are hashed incrementally, so the result does not depend on how rows are split into
batches. With structs, validity is decided over whole reference batches (``validity``): rows
are held back until their batch of the reference reader is complete (``reader_plan``). When
the records are read from a Parquet file whose row groups the plan knows, the rows a struct
quirk exposes are hashed with the values arrow-rs's reader leaves in their slots.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from common.hashing.data_types import Layout, data_type_bytes, leaf_layout
from common.hashing.reader_plan import ReaderPlan, reader_leftovers
from common.hashing.threads import hash_pool
from common.hashing.validity import Mask, combine_with_parent, own_validity
from common.hashing.value_stream import emit_dictionary, emit_values, with_rows_from
from common.odf.errors import ValidationError
from common.odf.multihash import ARROW0_SHA3_256, Multihash


class _ColumnDigest:
    """The hasher of one leaf column (``ArrayDigestV0``)."""

    def __init__(self, path: str, data_type: pa.DataType) -> None:
        self.path = path
        self._hasher = hashlib.sha3_256(data_type_bytes(data_type, path))
        self.depends_on_reads = False
        self.exposed_slots = 0

    def update(
        self, pieces: Sequence[pa.Array], parent: Mask, first_row: int, plan: ReaderPlan
    ) -> None:
        """Hash consecutive ``pieces`` of the column, whole reference batches from
        ``first_row`` on; ``parent`` covers all their rows."""
        if parent is None:  # its own validity only: no struct quirk, piece by piece
            for piece in pieces:
                self._update_alone(piece)
            return
        decoded = [p.dictionary_decode() if pa.types.is_dictionary(p.type) else p for p in pieces]
        own = _concat_validity(decoded)
        length = sum(len(p) for p in decoded)
        valid = combine_with_parent(parent, own, plan.batch_starts(first_row, length))
        blank = None if own is None or parent is None else _blank_rows(valid, own)
        if blank is not None:
            self.exposed_slots += int(np.count_nonzero(blank))
        if blank is not None and own is not None and plan.reads_known:
            # The slots arrow-rs's reader left in those rows (``reader_plan``).
            source = reader_leftovers(own, blank, plan.read_starts(first_row, length))
            decoded = [with_rows_from(_concat(decoded), source, blank)]
            blank = None
        elif blank is not None:
            self.depends_on_reads = True
        start = 0
        for piece in decoded:
            stop = start + len(piece)
            piece_valid = None if valid is None else valid[start:stop]
            piece_blank = None if blank is None else blank[start:stop]
            emit_values(piece, piece_valid, piece_blank, self._hasher.update)
            start = stop

    def _update_alone(self, piece: pa.Array) -> None:
        if pa.types.is_dictionary(piece.type):
            if leaf_layout(piece.type.value_type).layout is Layout.BINARY:
                emit_dictionary(piece, self._hasher.update)
                return
            piece = piece.dictionary_decode()
        emit_values(piece, own_validity(piece), None, self._hasher.update)

    def digest(self) -> bytes:
        return self._hasher.digest()


def _blank_rows(valid: Mask, own: npt.NDArray[np.bool_]) -> Mask:
    """Rows that hash as valid although the array marks them null (struct quirk)."""
    blank = ~own if valid is None else valid & ~own
    return blank if bool(blank.any()) else None


def _concat(pieces: Sequence[pa.Array]) -> pa.Array:
    return pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)


def _concat_validity(pieces: Sequence[pa.Array]) -> Mask:
    masks = [own_validity(p) for p in pieces]
    if all(m is None for m in masks):
        return None
    if len(masks) == 1:
        return masks[0]
    return np.concatenate(
        [
            np.ones(len(p), dtype=np.bool_) if m is None else m
            for p, m in zip(pieces, masks, strict=True)
        ]
    )


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def walk_fields(
    fields: Iterable[pa.Field], level: int = 0, prefix: str = ""
) -> Iterator[tuple[pa.Field, int, str]]:
    """Fields depth-first with their nesting level and dotted path."""
    for field in fields:
        path = f"{prefix}{field.name}"
        yield field, level, path
        if pa.types.is_struct(field.type):
            yield from walk_fields(field.type.fields, level + 1, f"{path}.")


class FieldDigest:
    """The leaf columns of one top-level field, fed that field's rows in order.

    Fields are independent of each other until the final digest: each can be fed on a thread
    of its own, one thread per field at a time (``LogicalHasher.fields``). A struct field
    holds back the rows of an incomplete reference batch (``validity`` decides its nulls over
    whole batches), so its result does not depend on how its rows are cut.
    """

    def __init__(self, field: pa.Field, path: str, plan: ReaderPlan) -> None:
        self.field = field
        self.leaves = [
            _ColumnDigest(leaf_path, f.type)
            for f, _, leaf_path in walk_fields([field], prefix=path)
            if not pa.types.is_struct(f.type)
        ]
        """The leaf columns' digests, in walk order."""
        self._plan = plan
        self._is_struct = pa.types.is_struct(field.type)
        self.rows = 0
        """Rows hashed so far (held-back rows not included)."""
        self._pending: list[pa.Array] = []  # rows of an incomplete reference batch (structs)
        self._pending_rows = 0

    def update(self, array: pa.Array) -> None:
        """Hash the next rows of the field (an array of its type, or one that hashes alike)."""
        if not array.type.equals(self.field.type) and _signature(
            pa.schema([self.field.with_type(array.type)])
        ) != _signature(pa.schema([self.field])):
            raise ValidationError(
                f"field {self.field.name!r} of type {self.field.type} cannot hash values of"
                f" type {array.type}"
            )
        if self._is_struct:
            self._add_by_windows(array)
        elif len(array):
            self._hash([array])

    def finish(self) -> int:
        """Hash the held-back rows; how many rows the field has had."""
        self._flush()
        return self.rows

    def _add_by_windows(self, array: pa.Array) -> None:
        """Hash whole reference batches; hold back the rows of an incomplete one."""
        start, rows = 0, len(array)
        while start < rows:
            position = self.rows + self._pending_rows
            if not self._pending:
                whole = self._plan.last_batch_end(position, position + rows - start) - position
                if whole > 0:
                    self._hash([array.slice(start, whole)])
                    start += whole
                    continue
            end = self._plan.batch_end(position)
            take = min(end - position, rows - start)
            self._pending.append(array.slice(start, take))
            self._pending_rows += take
            start += take
            if position + take == end:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            pending, self._pending, self._pending_rows = self._pending, [], 0
            self._hash(pending)

    def _hash(self, pieces: list[pa.Array]) -> None:
        """Hash consecutive pieces whose rows start at ``self.rows``."""
        rows = sum(len(p) for p in pieces)
        starts = self._plan.batch_starts(self.rows, rows)
        work = _leaf_work(self.field, pieces, None, starts, iter(self.leaves))
        for leaf, leaf_pieces, parent in work:
            leaf.update(leaf_pieces, parent, self.rows, self._plan)
        self.rows += rows


def _leaf_work(
    field: pa.Field,
    pieces: list[pa.Array],
    parent: Mask,
    starts: npt.NDArray[np.int64],
    leaves: Iterator[_ColumnDigest],
) -> Iterator[tuple[_ColumnDigest, list[pa.Array], Mask]]:
    """Each leaf under ``field`` (walk order) with its pieces and its parents' validity."""
    if not pa.types.is_struct(field.type):
        yield next(leaves), pieces, parent
        return
    combined = combine_with_parent(parent, _concat_validity(pieces), starts)
    for i, child in enumerate(field.type.fields):
        yield from _leaf_work(child, [p.field(i) for p in pieces], combined, starts, leaves)


class LogicalHasher:
    """Incremental logical hash of record batches that share one schema.

    ``digest()`` ends the stream: no batch can be added after it. ``plan`` is how the
    reference reads the same records (``reader_plan``): give the file's row groups when they
    are read from a Parquet file. ``parallel=False`` hashes the fields of each batch one
    after the other on the calling thread: for a caller that already hashes in a thread of
    its own, beside other work (the ingest pipeline), where more threads only contend.

    A reader that reads each top-level field by itself (``parquet_fields``) feeds ``fields``
    directly instead of calling ``update``; ``digest`` checks that they all got as many rows.
    """

    def __init__(
        self, schema: pa.Schema, plan: ReaderPlan | None = None, *, parallel: bool = True
    ) -> None:
        self._schema = schema
        self._parallel = parallel
        plan = plan or ReaderPlan()
        self._names = hashlib.sha3_256()
        for field, level, _ in walk_fields(schema):
            name = field.name.encode()
            self._names.update(_u64(len(name)) + name + _u64(level))
        self.fields = [FieldDigest(field, "", plan) for field in schema]
        """One digest per top-level field, in schema order."""
        self._signature = _signature(schema)
        self._digest: bytes | None = None
        self._rows = 0

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def update(self, batch: pa.RecordBatch) -> None:
        if self._digest is not None:
            raise ValidationError("records cannot be added to a finished logical hash")
        if not batch.schema.equals(self._schema) and _signature(batch.schema) != self._signature:
            raise ValidationError(
                f"record batch schema {_describe(batch.schema)} does not match the hashed "
                f"schema {_describe(self._schema)}"
            )
        if self._parallel and batch.num_rows >= _PARALLEL_MIN_ROWS and len(self.fields) > 1:
            # Every field has its own SHA3 states: the fields of a large batch are hashed on
            # several threads (SHA3 updates and Arrow/numpy kernels release the GIL); the
            # order of updates within each field is unchanged, so the digest is the same.
            columns = batch.columns
            futures = [
                hash_pool().submit(f.update, c) for f, c in zip(self.fields, columns, strict=True)
            ]
            for future in futures:
                future.result()
        else:
            for field, column in zip(self.fields, batch.columns, strict=True):
                field.update(column)

    def digest(self) -> bytes:
        if self._digest is None:
            rows = {field.finish() for field in self.fields}
            if len(rows) > 1:
                raise ValidationError(
                    f"the fields of the hashed records have different numbers of rows: {rows}"
                )
            self._rows = rows.pop() if rows else 0
            final = self._names.copy()
            for column in self._leaves():
                final.update(column.digest())
            self._digest = final.digest()
        return self._digest

    @property
    def rows(self) -> int:
        """How many records were hashed (known once the digest is)."""
        self.digest()
        return self._rows

    def multihash(self) -> Multihash:
        return Multihash(ARROW0_SHA3_256, self.digest())

    @property
    def depends_on_reads(self) -> bool:
        """Did a struct quirk expose null slots while the plan knows no reads?

        Those slots were hashed as zero values; the reference hashes what its reader leaves
        there. A writer that hashes the records it writes must then hash the written file
        (``logical_hash_parquet``) to record the reference's hash.
        """
        return any(column.depends_on_reads for column in self._leaves())

    @property
    def exposed_slots(self) -> int:
        """How many null slots of struct fields were hashed as values (the OR quirk)."""
        return sum(column.exposed_slots for column in self._leaves())

    def _leaves(self) -> Iterator[_ColumnDigest]:
        """Every leaf column's digest, in walk order."""
        for field in self.fields:
            yield from field.leaves


_PARALLEL_MIN_ROWS = 8192
"""Batches smaller than this hash their columns on the calling thread."""


def _signature(schema: pa.Schema) -> list[tuple[str, int, bytes]]:
    """What the hash sees of a schema: field names, levels and leaf type bytes."""
    return [
        (path, level, b"" if pa.types.is_struct(f.type) else data_type_bytes(f.type, path))
        for f, level, path in walk_fields(schema)
    ]


def _describe(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"
