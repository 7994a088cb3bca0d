"""The facts ``odf verify`` reads of a stored data file: hashes, count and columns from one
read, and a file that is no Parquet still hashed by its bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common.hashing import logical_hash, physical_hash_file
from coordinator.verify.files import data_file_facts


def _stored(root: Path, write: bytes | pa.Table) -> Path:
    staged = root / "staged"
    if isinstance(write, bytes):
        staged.write_bytes(write)
    else:
        pq.write_table(write, staged, row_group_size=5_000)
    (root / "data").mkdir()
    return staged.rename(root / "data" / str(physical_hash_file(staged)))


def test_a_data_file_is_described_from_one_read(tmp_path: Path) -> None:
    table = pa.table({"offset": pa.array(np.arange(12_345)), "name": ["x", None, "z"] * 4115})
    path = _stored(tmp_path, table)
    facts = data_file_facts(tmp_path, physical_hash_file(path))
    assert facts.physical_hash == physical_hash_file(path)
    assert facts.size == path.stat().st_size
    assert facts.logical_hash == logical_hash(table)
    assert facts.records == 12_345
    assert facts.columns == (("offset", "int64"), ("name", "string"))
    assert facts.unreadable is None and facts.invalid_utf8 is None


def test_a_file_that_is_no_parquet_is_still_hashed_by_its_bytes(tmp_path: Path) -> None:
    path = _stored(tmp_path, b"PAR1 not a Parquet file at all PAR1")
    facts = data_file_facts(tmp_path, physical_hash_file(path))
    assert facts.physical_hash == physical_hash_file(path)
    assert facts.size == path.stat().st_size
    assert facts.logical_hash is None and facts.records is None
    assert facts.unreadable is not None and "not a readable Parquet file" in facts.unreadable
