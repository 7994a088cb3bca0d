"""One read of a Parquet data file gives the same facts as reading it for each separately."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.hashing import (
    digest_data_file,
    logical_hash_parquet,
    physical_hash_file,
)
from common.odf.errors import DecodeError, NotFoundError, ValidationError


def test_digest_matches_the_separate_hashes(tmp_path: Path) -> None:
    path = tmp_path / "slice"
    table = pa.table(
        {
            "offset": pa.array(range(200_000), pa.int64()),
            "name": pa.array([f"n{i % 97}" if i % 11 else None for i in range(200_000)]),
        }
    )
    pq.write_table(table, path, row_group_size=50_000)
    digest = digest_data_file(path)
    assert digest.physical_hash == physical_hash_file(path)
    assert digest.logical_hash == logical_hash_parquet(path)
    assert digest.records == 200_000
    assert digest.size == path.stat().st_size
    assert digest.schema == table.schema and digest.schema.metadata is None


def test_bad_files_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no such file"):
        digest_data_file(tmp_path / "missing")
    with pytest.raises(ValidationError, match="not a regular file"):
        digest_data_file(tmp_path)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"PAR1 certainly not parquet PAR1")
    with pytest.raises(DecodeError, match=r"garbage.*not a readable Parquet file"):
        digest_data_file(garbage)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(DecodeError, match="not a readable Parquet file"):
        digest_data_file(empty)
