"""Data files written by the reference's engines (``tests/fixtures/reference-written``) hash
here as the reference hashes them: arrow-digest over the batches arrow-rs reads."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from common.hashing import digest_data_file, physical_hash_file

from .arrow_rs_oracle import reference_hash

FIXTURES = Path(__file__).parents[2] / "fixtures" / "reference-written"

# (file, records): the files are those of the fixture's README, byte for byte.
FILES = [
    ("datafusion-51.parquet", 3),
    ("parquet-rs-39.parquet", 10),
    ("spark-parquet-mr-1.10.parquet", 10),
]


@pytest.mark.parametrize(("name", "records"), FILES)
def test_a_reference_written_file_hashes_as_the_reference(name: str, records: int) -> None:
    path = FIXTURES / name
    digest = digest_data_file(path)
    assert digest.records == records == pq.ParquetFile(path).metadata.num_rows
    assert digest.physical_hash == physical_hash_file(path)
    assert digest.logical_hash.digest == reference_hash(path)
