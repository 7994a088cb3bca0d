"""Everything ODF records about a Parquet data file, from one read of it.

A ``DataSlice`` names its file by the physical hash (SHA3-256 of the bytes) and its records by
the logical hash; a coordinator also checks the record count and takes the Arrow schema. All
of them come from one memory mapping of the file: the bytes are hashed on one thread
(``hashlib`` releases the GIL) while the Parquet reader decodes the same mapped pages for the
logical hash, field by field on the others (``parquet_records``), so the file is read from
disk once, never copied into Python, on every core.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from common.hashing.parquet_records import hash_parquet_file
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
