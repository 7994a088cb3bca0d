"""Hashes of files: the logical hash of a Parquet file's records, the physical hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.hashing import (
    PhysicalHasher,
    UnsupportedTypeError,
    logical_hash,
    logical_hash_parquet,
    physical_hash_bytes,
    physical_hash_file,
)
from common.odf.errors import DecodeError, NotFoundError, ValidationError
from common.odf.multihash import SHA3_256


def mixed_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(3)
    index = np.arange(rows)
    return pa.table(
        {
            "offset": pa.array(index, pa.int64()),
            "event_time": pa.array(index * 1000, pa.timestamp("ms", "UTC")),
            "city": pa.array(rng.choice(["A", "B", "Kyiv", "Zürich"], rows)).dictionary_encode(),
            "value": pa.array(rng.normal(size=rows), mask=index % 7 == 0),
            "tags": pa.array([["x"] * (i % 3) if i % 5 else None for i in range(rows)]),
            "point": pa.array([{"x": float(i), "y": None if i % 4 else i} for i in range(rows)]),
        }
    )


def test_parquet_file_hashes_as_its_records(tmp_path: Path) -> None:
    table = mixed_table(70_000)  # more than one read batch, several row groups
    path = tmp_path / "data.parquet"
    pq.write_table(table, path, row_group_size=30_000)
    assert logical_hash_parquet(path) == logical_hash(table)


def test_parquet_encoding_does_not_change_the_logical_hash(tmp_path: Path) -> None:
    table = mixed_table(1_000)
    plain, packed = tmp_path / "plain.parquet", tmp_path / "packed.parquet"
    pq.write_table(table, plain, use_dictionary=False, compression="none")
    pq.write_table(table, packed, compression="zstd", row_group_size=100, data_page_size=512)
    assert physical_hash_file(plain) != physical_hash_file(packed)
    assert logical_hash_parquet(plain) == logical_hash_parquet(packed)


def test_parquet_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"missing\.parquet: no such file"):
        logical_hash_parquet(tmp_path / "missing.parquet")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    with pytest.raises(DecodeError, match=r"junk\.parquet: not a readable Parquet file"):
        logical_hash_parquet(junk)
    with pytest.raises(ValidationError, match="not a regular file"):
        logical_hash_parquet(tmp_path)
    durations = tmp_path / "durations.parquet"
    pq.write_table(pa.table({"took": pa.array([1], pa.duration("s"))}), durations)
    with pytest.raises(UnsupportedTypeError, match="column 'took'"):
        logical_hash_parquet(durations)


def test_physical_hash_of_bytes() -> None:
    """The value of the FlatBuffers guide (section 4.2) for b"prev"."""
    assert physical_hash_bytes(b"prev").to_multibase() == (
        "f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272"
    )


def test_physical_hash_of_a_file_is_read_in_chunks(tmp_path: Path) -> None:
    data = np.random.default_rng(1).bytes(3 * (1 << 20) + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)
    result = physical_hash_file(path)
    assert result.code == SHA3_256
    assert result.digest == hashlib.sha3_256(data).digest()
    assert result == physical_hash_bytes(data)


def test_physical_hash_errors(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no such file"):
        physical_hash_file(tmp_path / "missing")
    with pytest.raises(ValidationError, match="not a regular file"):
        physical_hash_file(tmp_path)


def test_physical_hasher_takes_the_bytes_piece_by_piece() -> None:
    data = np.random.default_rng(2).bytes((1 << 20) + 5)
    hasher = PhysicalHasher()
    for start in range(0, len(data), 100_000):
        hasher.update(memoryview(data)[start : start + 100_000])
    assert hasher.size == len(data)
    assert hasher.multihash() == physical_hash_bytes(data)
