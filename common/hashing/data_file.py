"""Everything ODF records about a Parquet data file, from one read of it.

A ``DataSlice`` names its file by the physical hash (SHA3-256 of the bytes) and its records by
the logical hash; a coordinator also checks the record count and takes the Arrow schema. All
of them come from one memory mapping of the file: the bytes are hashed on one thread
(``hashlib`` releases the GIL) while the Parquet reader decodes the same mapped pages for the
logical hash, field by field on the others (``parquet_records``), so the file is read from
disk once, never copied into Python, on every core.

``inspect_data_file`` adds what verification checks besides (``odf verify``, on the
coordinator or in the engine's executor tasks): the column types, the string columns' UTF-8,
and, for a file that does not read as Parquet, its bytes' hash and why.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa

from common.arrow_strings import invalid_utf8_in_parquet
from common.hashing.logical import open_parquet
from common.hashing.parquet_records import hash_parquet_file
from common.hashing.physical import physical_hash_file
from common.odf.errors import OdfError
from common.odf.multihash import SHA3_256, Multihash


@dataclass(frozen=True, slots=True, kw_only=True)
class DataFileDigest:
    """The facts of one Parquet data file."""

    physical_hash: Multihash
    logical_hash: Multihash
    records: int
    size: int
    schema: pa.Schema
    """The Arrow schema of the records (without the file's key-value metadata)."""
    exposed_slots: int
    """Null slots of struct fields the logical hash read as values (the struct-null quirk)."""


def digest_data_file(path: str | Path) -> DataFileDigest:
    """Hash, count and describe the Parquet file at ``path`` in one read (module doc)."""
    hasher, (physical_hash, size) = hash_parquet_file(path, alongside=_physical)
    return DataFileDigest(
        physical_hash=physical_hash,
        logical_hash=hasher.multihash(),
        records=hasher.rows,
        size=size,
        schema=hasher.schema.remove_metadata(),
        exposed_slots=hasher.exposed_slots,
    )


def _physical(data: pa.Buffer) -> tuple[Multihash, int]:
    """The physical hash of the file's bytes, and how many there are."""
    return Multihash(SHA3_256, hashlib.sha3_256(memoryview(data)).digest()), data.size


@dataclass(frozen=True, slots=True, kw_only=True)
class FileFacts:
    """What a stored file actually is, as verification checks it (``odf verify``): a data
    file's bytes always, its records when it reads as Parquet; a checkpoint's bytes only."""

    path: str
    """Relative to the dataset directory (``data/<hash>``)."""
    size: int | None = None
    """``None``: the file is missing."""
    physical_hash: Multihash | None = None
    logical_hash: Multihash | None = None
    records: int | None = None
    columns: tuple[tuple[str, str], ...] | None = None
    """``(name, Arrow type)`` of each column (data files only, ``column_types``)."""
    unreadable: str | None = None
    """Why the records could not be read as Parquet (data files only)."""
    invalid_utf8: str | None = None
    """The first string column holding invalid UTF-8 (data files only)."""
    exposed_slots: int = 0
    """Null struct-field slots the logical hash reads as values (the struct-null quirk)."""


def inspect_data_file(path: str | Path, name: str) -> FileFacts:
    """The facts of the data file at ``path`` (module doc), called ``name`` in them;
    ``OSError`` when it cannot be read at all (missing, a directory, no permission)."""
    try:
        digest = digest_data_file(path)
        with open_parquet(path) as parquet:
            invalid_utf8 = invalid_utf8_in_parquet(parquet)
    except OdfError as e:  # the bytes are still hashed, the records cannot be
        raw = FileFacts(path=name, size=os.stat(path).st_size, physical_hash=_physical_hash(path))
        return replace(raw, unreadable=" ".join(str(e).split()))
    return FileFacts(
        path=name,
        size=digest.size,
        physical_hash=digest.physical_hash,
        logical_hash=digest.logical_hash,
        records=digest.records,
        columns=column_types(digest.schema),
        invalid_utf8=invalid_utf8,
        exposed_slots=digest.exposed_slots,
    )


def column_types(schema: pa.Schema) -> tuple[tuple[str, str], ...]:
    """What a data file's schema must agree on with ``SetDataSchema``: names and types, in
    order (nullability and metadata aside, as schema evolution compares them)."""
    return tuple((f.name, str(f.type)) for f in schema)


def _physical_hash(path: str | Path) -> Multihash:
    try:
        return physical_hash_file(path)
    except OdfError as e:  # gone or not a regular file meanwhile
        raise OSError(f"{path}: {e}") from None
