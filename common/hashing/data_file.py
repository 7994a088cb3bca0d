"""Everything ODF records about a Parquet data file, from one read of it.

A ``DataSlice`` names its file by the physical hash (SHA3-256 of the bytes) and its records by
the logical hash; a coordinator also checks the record count and takes the Arrow schema. All
of them come from one memory mapping of the file: the bytes are hashed in a second thread
(``hashlib`` releases the GIL) while the Parquet reader decodes the same mapped pages for the
logical hash, so the file is read from disk once, never copied into Python.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from common.hashing.logical import PARQUET_BATCH_ROWS, parquet_reader_plan
from common.hashing.record_digest import LogicalHasher
from common.odf.errors import DecodeError, NotFoundError, ValidationError
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


def digest_data_file(path: str | Path) -> DataFileDigest:
    """Hash, count and describe the Parquet file at ``path`` in one read (module doc)."""
    file = Path(path)
    if not file.exists():
        raise NotFoundError(f"{path}: no such file")
    if not file.is_file():
        raise ValidationError("not a regular file", path=str(path))
    try:
        with pa.memory_map(str(file), "r") as mapped:
            data = mapped.read_buffer()
            with ThreadPoolExecutor(1) as pool:
                physical = pool.submit(_sha3, data)
                parquet = pq.ParquetFile(pa.BufferReader(data))
                hasher = LogicalHasher(parquet.schema_arrow, parquet_reader_plan(parquet))
                for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                    hasher.update(batch)
                return DataFileDigest(
                    physical_hash=physical.result(),
                    logical_hash=hasher.multihash(),
                    records=parquet.metadata.num_rows,
                    size=data.size,
                    schema=parquet.schema_arrow.remove_metadata(),
                )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        raise DecodeError(f"not a readable Parquet file ({e})", path=str(path)) from None


def _sha3(data: pa.Buffer) -> Multihash:
    return Multihash(SHA3_256, hashlib.sha3_256(memoryview(data)).digest())
